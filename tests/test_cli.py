"""The CLI skeleton: version, help with examples on every subcommand, the one error path."""

from conftest import run_xlt

from xlt.cli import cli


def test_version():
    res = run_xlt("--version")
    assert res.returncode == 0 and "xlt, version" in res.stdout


def test_every_subcommand_has_help_with_an_example():
    names = cli.list_commands(None)
    assert names, "no subcommands registered"
    for name in names:
        res = run_xlt(name, "--help")
        assert res.returncode == 0, (name, res.stderr)
        assert "xample" in res.stdout, f"xlt {name} --help shows no example"


def test_unknown_subcommand_is_a_usage_error():
    res = run_xlt("no-such-command")
    assert res.returncode == 2 and "Traceback" not in res.stderr
