"""The CLI skeleton: version, help with examples on every subcommand, the one error path."""

import pytest
from conftest import assert_one_line_error, run_in_process, run_xlt

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


def test_devices_are_read_one_way_everywhere():
    import torch

    from xlt.utils.device import resolve_device
    from xlt.utils.errors import XltError

    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu") and resolve_device(torch.device("cpu")).type == "cpu"
    for bad in ("gpu", "cuda:x"):
        try:
            resolve_device(bad)
        except XltError as e:
            assert "unknown device" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")
    assert_one_line_error(run_xlt("extract", "--device", "gpu", "--model", "r", "--lang", "en", "x", "-o", "y"),
                          "xlt extract: error: Invalid value for '--device'", "unknown device 'gpu'")
    assert_one_line_error(run_xlt("align", "word", "--device", "gpu", "--model", "r", "--source-lang", "en",
                                  "--target-lang", "fr", "--train-dict", "a", "--test-dict", "b", "-o", "c"),
                          "xlt align word: error: unknown device 'gpu'")
    if not torch.cuda.is_available():
        assert_one_line_error(run_xlt("cka", "compare", "--device", "cuda", "--model-a", "r", "--lang-a", "en",
                                      "--text-a", "t", "--lang-b", "fr", "--text-b", "t", "-o", "o"),
                              "no CUDA device on this machine")


def test_an_output_path_that_is_a_directory_is_one_line_and_nothing_is_written(tiny_run, tmp_path):
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n", encoding="utf-8")
    (tmp_path / "taken").mkdir()
    res = run_xlt("tokenize", "--lang", "en", text, "-o", tmp_path / "taken")
    assert_one_line_error(res, str(tmp_path / "taken"), "is a directory")

    # Several outputs: the last one being a directory must stop the command before the first is written.
    (tmp_path / "reps.json").mkdir()
    res = run_xlt("extract", "--model", tiny_run, "--lang", "en", text, "-o", tmp_path / "reps")
    assert_one_line_error(res, str(tmp_path / "reps.json"), "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["en.txt", "reps.json", "taken"]

    dictionary = tmp_path / "en-fr.txt"
    dictionary.write_text("cat chat\n", encoding="utf-8")
    res = run_xlt("codeswitch", "--dict", dictionary, text, "-o", tmp_path / "out.txt",
                  "--report", tmp_path / "missing" / "report.json")
    assert_one_line_error(res, "output directory does not exist")
    assert not (tmp_path / "out.txt").exists()


def test_extract_refuses_an_input_of_blank_lines_at_word_level(tiny_run, tmp_path):
    text = tmp_path / "blank.txt"
    text.write_text("\n  \n", encoding="utf-8")
    res = run_xlt("extract", "--model", tiny_run, "--lang", "en", "--level", "word", text, "-o", tmp_path / "reps")
    assert_one_line_error(res, str(text), "every line is blank")
    assert not list(tmp_path.glob("reps*"))


def test_quiet_works_after_the_subcommand_too(tmp_path):
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n", encoding="utf-8")
    loud = run_xlt("tokenize", "--lang", "en", text, check=True)
    assert loud.stdout == "the cat sees a dog .\n" and "tokenize: 1 lines" in loud.stderr
    for args in (("-q", "tokenize", "--lang", "en", text), ("tokenize", "-q", "--lang", "en", text),
                 ("tokenize", "--lang", "en", text, "--quiet")):
        res = run_xlt(*args, check=True)
        assert (res.stdout, res.stderr) == (loud.stdout, ""), args

    # A nested command: bpe learn says when the corpus allows fewer merges than asked, unless quiet.
    codes = tmp_path / "codes"
    assert "allows only" in run_xlt("bpe", "learn", "-n", "1000", "-o", codes, text, check=True).stderr
    for args in (("bpe", "learn", "-q"), ("bpe", "-q", "learn"), ("-q", "bpe", "learn")):
        res = run_xlt(*args, "-n", "1000", "-o", codes, text, check=True)
        assert res.stderr == "", args
    assert codes.read_text(encoding="utf-8").strip()


def test_a_mistyped_command_gets_the_closest_name():
    assert_one_line_error(run_xlt("tokenise", "--lang", "en"),
                          "xlt: error: No such command 'tokenise'. Did you mean 'tokenize'?", "(see xlt --help)")
    assert_one_line_error(run_xlt("bpe", "lern"), "xlt bpe: error: No such command 'lern'. Did you mean 'learn'?")
    # Commands not imported yet are candidates too, and nothing close means no guess.
    assert_one_line_error(run_xlt("shiftdecode"), "Did you mean 'shift-decode'?")
    res = run_xlt("no-such-command")
    assert_one_line_error(res, "No such command 'no-such-command'")
    assert "Did you mean" not in res.stderr


def test_a_mistyped_command_in_other_case_gets_the_closest_name():
    assert_one_line_error(run_xlt("PRETRAIN"), "No such command 'PRETRAIN'. Did you mean 'pretrain'?")
    assert_one_line_error(run_xlt("Tokenise"), "Did you mean 'tokenize'?")
    assert_one_line_error(run_xlt("bpe", "LEARN"), "xlt bpe: error: No such command 'LEARN'. Did you mean 'learn'?")


def test_a_group_without_its_command_shows_its_help_as_click_does():
    import click
    from click.testing import CliRunner

    bare = CliRunner().invoke(click.Group("g", commands={"a": click.Command("a")}), [])  # click's own handling
    for group in ((), ("bpe",), ("export",)):
        res, help_text = run_xlt(*group), run_xlt(*group, "--help", check=True).stdout
        assert res.returncode == bare.exit_code, (group, res.returncode)
        assert (res.stdout, res.stderr) == ((help_text, "") if bare.stdout else ("", help_text)), group
        assert help_text.startswith(f"Usage: {' '.join(('xlt',) + group)} [OPTIONS] COMMAND")


@pytest.mark.parametrize("command", ["liu-figures", "liu-pos"])
def test_a_layer_that_is_no_layer_is_one_line(command, tmp_path, capsys):
    res = run_in_process(capsys, "report", command, "--results-dir", tmp_path, "--layer", "foo", "-o", tmp_path / "out")
    assert_one_line_error(res, "'foo' is none of last, best or a layer number")
    assert not (tmp_path / "out").exists()
