"""The CLI skeleton: version, help with examples on every subcommand, the one error path."""

from conftest import assert_one_line_error, run_xlt

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


def test_usage_errors_are_one_line_naming_the_command():
    assert_one_line_error(run_xlt("no-such-command"), "xlt: error: No such command 'no-such-command'")
    assert_one_line_error(run_xlt("pretrain", "--bogus"), "xlt pretrain: error: No such option '--bogus'",
                          "(see xlt pretrain --help)")
    assert_one_line_error(run_xlt("cka", "compare", "--n-sentences", "zero"),
                          "xlt cka compare: error: Invalid value for '--n-sentences'")
