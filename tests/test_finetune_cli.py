"""``xlt finetune`` end to end: the real command on a tiny pretrained model, XNLI and a plugin task.

Subprocesses where the process boundary is the point (exit status, stdout/stderr, idempotence);
in-process ``main()`` for the error lines and option parsing, which need no model training.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import run_in_process as in_process, assert_one_line_error, run_xlt
from finetune_toy import build_toy_world, write_nli

from xlt.text.fake import to_fake


TESTS = Path(__file__).resolve().parent
TOY = "finetune_toy:ToyTask"
SMALL = ["--batch-size", "8", "--encoder-lr", "1e-4", "--head-lr", "1e-3", "--epochs", "1", "--checkpoint", "last"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")


@pytest.fixture(autouse=True)
def toy_on_path(monkeypatch):
    """The subprocess imports the toy task module as a plugin (``finetune_toy:ToyTask``); one thread
    is fastest for the tiny model and keeps a busy shared machine from stalling it."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)




def test_plugin_task_end_to_end_then_idempotent(world, tmp_path):
    out = tmp_path / "out"
    args = ["finetune", TOY, "--model", world.run, "-o", out, *world.args("fr"), *SMALL, "--batch-size", "16"]
    first = run_xlt(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("# xlt finetune") and "| selected: bs" in first.stdout
    run_lines = [line for line in first.stderr.splitlines() if line.startswith("[")]
    assert len(run_lines) == 2 and all(": done, best epoch 1" in line and "test fr" in line for line in run_lines)
    files = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*") if p.is_file() and p.name != "lock"}
    second = run_xlt(*args)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert sum("done earlier" in line for line in second.stderr.splitlines()) == 2
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*") if p.is_file() and p.name != "lock"} == files


def test_xnli_zero_shot(world, tmp_path):
    paths = {}
    for lang in ("en", "fr"):
        for split, n, seed in (("train", 48, 20), ("dev", 12, 21), ("test", 12, 22)):
            paths[lang, split] = write_nli(tmp_path / f"{split}-{lang}.tsv", n, seed, lang)
    out = tmp_path / "out"
    res = run_xlt("finetune", "xnli", "--model", world.run, "-o", out, "--checkpoint", "last",
                  "--train", "en", paths["en", "train"], "--dev", "en", paths["en", "dev"],
                  "--eval", "en", paths["en", "dev"], paths["en", "test"],
                  "--eval", "fr", paths["fr", "dev"], paths["fr", "test"],
                  "--batch-size", "8", "--encoder-lr", "1e-4", "--head-lr", "1e-3", "--epochs", "2",
                  "--epoch-size", "24", "--seeds", "1,2")
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and len(results["runs"]) == 2
    for run in results["runs"]:
        assert len(run["dev_curve"]) == 2 and run["settings"]["schedule"] == "constant"
        assert 0 <= run["results"]["plain"]["fr"]["test"]["accuracy"] <= 100
        steps = [json.loads(line)["step"] for line in (out / run["dir"] / "metrics.jsonl").read_text().splitlines()]
        assert steps == [3, 6]  # epochs of 24 pairs in batches of 8
    assert results["summary"]["selected"]["variants"]["plain"]["fr"]["test"]["n"] == 2


def test_xnli_text_read_as_nothing_is_an_error_before_training(world, tmp_path, capsys):
    """Fake-English given under a real language's code: Moses blanks its private-use characters, and
    the model would read every such pair as its special tokens alone (chance, silently)."""
    paths = {(lang, split): write_nli(tmp_path / f"{split}-{lang}.tsv", n, 20 + i, lang)
             for lang in ("en", "fr") for i, (split, n) in enumerate((("train", 24), ("dev", 6), ("test", 6)))}
    for (lang, split), line, column, segment in ((("fr", "test"), 3, 1, "hypothesis"), (("en", "train"), 5, 0, "premise")):
        files = dict(paths)
        files[lang, split] = tmp_path / f"blank-{split}-{lang}.tsv"
        rows = [row.split("\t") for row in paths[lang, split].read_text(encoding="utf-8").splitlines()]
        rows[line - 1][column] = to_fake(rows[line - 1][column])
        files[lang, split].write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
        out = tmp_path / f"out-{split}"
        res = in_process(capsys, "finetune", "xnli", "--model", world.run, "-o", out, "--checkpoint", "last",
                         "--train", "en", files["en", "train"], "--dev", "en", files["en", "dev"],
                         "--eval", "en", files["en", "dev"], files["en", "test"], "--eval", "fr", files["fr", "dev"],
                         files["fr", "test"], "--batch-size", "8", "--epochs", "1")
        # one line (no start line before it), naming the file and line, and no run directory left
        assert_one_line_error(res, f"{files[lang, split]}:{line}:",
                              f"the {segment} is no token at all once tokenized as {lang}",
                              "give Fake-English under the code fake")
        assert not out.exists()


def test_a_failed_run_does_not_stop_the_grid(world, tmp_path, capsys):
    out = tmp_path / "out"
    res = in_process(capsys, "finetune", TOY, "--model", world.run, "-o", out, *world.args("fr"), *SMALL,
                     "--batch-size", "16", "--task-option", "fail_at_batch_size", "16")
    assert res.returncode == 1
    results = json.loads((out / "results.json").read_text())
    assert [r["status"] for r in results["runs"]] == ["done", "failed"]
    assert "toy failure" in results["runs"][1]["error"] and not results["complete"]
    assert "toy failure" in (out / results["runs"][1]["dir"] / "error.txt").read_text()


def test_config_file_with_command_line_overrides(world, tmp_path, capsys):
    config = tmp_path / "grid.toml"
    config.write_text('batch-size = [8, 16]\nencoder_lr = [1e-4]\nhead_lr = [1e-3]\nepochs = 1\n'
                      'checkpoint = "last"\nseeds = [3]\n')
    out = tmp_path / "out"
    res = in_process(capsys, "finetune", TOY, "--model", world.run, "-o", out, *world.args("fr"),
                     "--config", config, "--batch-size", "8")
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert [r["grid_point"]["batch_size"] for r in results["runs"]] == [8] and results["runs"][0]["seed"] == 3
    assert results["config"]["epochs"] == 1


def test_bad_inputs_are_one_line_errors(world, tmp_path, capsys):
    base = ["finetune", TOY, "-o", tmp_path / "out", *SMALL]
    res = in_process(capsys, *base, "--model", tmp_path / "nowhere", *world.args("fr"))
    assert_one_line_error(res, "nowhere", "not a pretrained run directory")
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--target", "de")
    assert_one_line_error(res, "language 'de' is not one of the model's")
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    res = in_process(capsys, *base, "--model", world.run, *world.args(), "--eval", "fr", empty, empty)
    assert_one_line_error(res, str(empty), "empty split")
    broken = tmp_path / "broken.tsv"
    broken.write_text("the cat sees a dog .\tanimal\nno label here\n")
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--train", "en", broken)
    assert_one_line_error(res, f"{broken}:2:", "sentence<TAB>label")
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--batch-size", "8,x")
    assert_one_line_error(res, "--batch-size", "'x' is not an integer")
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--train", "fr", world.split("fr", "train"))
    assert_one_line_error(res, "different languages")
    bad = tmp_path / "bad.json"
    bad.write_text('{"batch_sise": [8]}')
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--config", bad)
    assert_one_line_error(res, str(bad), "unknown option(s): batch_sise")
    for text, message in [('{"batch_size": "8"}', "option batch_size: expected Optional[list[int]], got '8'"),
                          ('{"eval": ["fr", "a", "b"]}', "option eval: expected dict[str, tuple[str, str]]"),
                          ('{"train": 5}', "option train: expected Optional[tuple[str, str]], got 5")]:
        bad.write_text(text)
        res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--config", bad)
        assert_one_line_error(res, str(bad), message)
    for name in ("bad.toml", "bad.json"):   # a non-UTF-8 byte is named with its line, as in every other file
        config = tmp_path / name
        config.write_bytes(b'seeds = "1"\n\n# \xff\n' if name.endswith(".toml") else b'{\n"seeds": "\xff"}\n')
        res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--config", config)
        assert_one_line_error(res, f"{config}:{3 if name.endswith('.toml') else 2}: not valid UTF-8")
    dev, test = world.split("en", "dev"), world.split("en", "test")
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--eval", "en", test, test)
    assert_one_line_error(res, f"two dev files for en: --dev {dev} and --eval en {test}")   # one went unread
    res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), "--seeds", "12,12")
    assert_one_line_error(res, "--seeds lists a value twice: [12, 12]")
    for option, value, says in [("--encoder-lr", "nan", "learning rates must be positive finite numbers"),
                                ("--head-lr", "inf", "learning rates must be positive finite numbers"),
                                ("--clip-norm", "-1", "--clip-norm must be 0 (off) or a positive number"),
                                ("--freeze-bottom", "99", "--freeze-bottom 99: the model has only")]:
        res = in_process(capsys, *base, "--model", world.run, *world.args("fr"), option, value)
        assert_one_line_error(res, says)
    assert not (tmp_path / "out").exists()
    # -o at a pretraining run (a later reader would take the folder for one run), or at another task's grid
    res = in_process(capsys, "finetune", TOY, "-o", world.run, *SMALL, "--model", world.run, *world.args("fr"))
    assert_one_line_error(res, f"{world.run}: holds a run's config.json")
    other = tmp_path / "ner-grid"
    other.mkdir()
    (other / "results.json").write_text(json.dumps({"format": "xlt-finetune-results/1", "task": "ner"}))
    res = in_process(capsys, "finetune", TOY, "-o", other, *SMALL, "--model", world.run, *world.args("fr"))
    assert_one_line_error(res, f"{other / 'results.json'}: holds the results of a ner grid, and this command "
                               f"fine-tunes {TOY}")
    assert sorted(p.name for p in other.iterdir()) == ["results.json"]


def test_task_options_are_typed(world, tmp_path, capsys):
    from xlt.finetune.registry import get_task

    assert get_task("parse", strip_subtypes="False").settings.strip_subtypes is False
    assert get_task("parse", single_root="no", arc_dim="64").settings.single_root is False
    assert get_task("parse", arc_dim="64").settings.arc_dim == 64
    res = in_process(capsys, "finetune", "ner", "-o", tmp_path / "out", "--model", world.run, *SMALL,
                     "--task-option", "dropout", "abc")
    assert_one_line_error(res, "ner setting dropout: expected float, got 'abc'")


def test_an_unseen_tag_in_a_target_file_fails_before_any_training(world, tmp_path, capsys):
    files = {"train": "the\tB-PER\ncat\tO\n\n", "dev": "a\tB-PER\ndog\tO\n\n",
             "fr-dev": "le\tO\n\n", "fr-test": "le\tO\nchat\tB-LOC\n\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    layout = tmp_path / "ner" / "wikiann" / "en"  # the source test set, from --data-dir's layout
    layout.mkdir(parents=True)
    (layout / "test").write_text(files["dev"])
    out = tmp_path / "out"
    res = in_process(capsys, "finetune", "ner", "-o", out, "--model", world.run, *SMALL, "--data-dir", tmp_path,
                     "--train", "en", tmp_path / "train", "--dev", "en", tmp_path / "dev",
                     "--eval", "fr", tmp_path / "fr-dev", tmp_path / "fr-test")
    assert_one_line_error(res, f"{tmp_path / 'fr-test'}:2:", "tag 'B-LOC' was not seen in training")
    assert not (out / "runs").exists()


SOURCE_SPLIT = {"ner": "the\tB-PER\ncat\tO\n\n", "xnli": "the cat\ta cat\tentailment\n",
                "parse": "1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n"}


@pytest.mark.parametrize("task", sorted(SOURCE_SPLIT))
def test_a_test_split_neither_named_nor_in_the_layout_says_how_to_name_it(world, tmp_path, capsys, task):
    given = tmp_path / "given"
    given.write_text(SOURCE_SPLIT[task])
    out = tmp_path / "out"
    res = in_process(capsys, "finetune", task, "-o", out, "--model", world.run, *SMALL, "--data-dir", tmp_path / "data",
                     "--train", "en", given, "--dev", "en", given, "--eval", "fr", given, given)
    assert_one_line_error(res, str(tmp_path / "data"), "en's test split", "--eval en DEV TEST")
    assert not (out / "runs").exists()


def test_the_default_data_layout_is_where_xlt_data_fetch_writes(tmp_path, monkeypatch):
    from xlt.finetune.config import default_path

    monkeypatch.setenv("XLT_DATA", str(tmp_path))
    path = default_path("ner", None, "fr", "test")
    assert path.startswith(str(tmp_path) + os.sep) and "fr" in path
    assert default_path("ner", "elsewhere", "fr", "test") == os.path.join("elsewhere", path[len(str(tmp_path)) + 1:])
