"""Damaged or contradictory inputs found by a review of every subcommand: each is one error line
naming the file (and line), exit status 2, never a traceback or a silent loss. Tiny inputs only."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args

from report_files import write_results
from test_report_noise import seeded
from xlt.embed.config import EmbedConfig
from xlt.finetune.ner import read_tagged
from xlt.finetune.parse import read_conllu
from xlt.report import table1
from xlt.text.vocab import SIDECAR_SUFFIX, Vocabulary
from xlt.track.records import read_records
from xlt.utils.errors import XltError
from xlt.utils.rundir import MetricsLog


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("bad-inputs"), n_train=60, n_dev=10)


def copy_store(inputs, tmp_path, lang: str = "en") -> tuple[list[str], str]:
    """The pretraining arguments with ``lang``'s training store copied under ``tmp_path``, and its prefix."""
    prefix = str(inputs["root"] / f"{lang}.train")
    copy = str(tmp_path / f"{lang}.train")
    for suffix in (".bin", ".idx", ".json"):
        shutil.copy(prefix + suffix, copy + suffix)
    return [copy if a == prefix else a for a in inputs["args"]], copy


def test_a_store_header_with_a_count_that_is_not_a_number(inputs, tmp_path):
    args, store = copy_store(inputs, tmp_path)
    header = json.loads(open(store + ".json").read())
    header["n_tokens"] = "many"
    open(store + ".json", "w").write(json.dumps(header))
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *args, *tiny_args(2), "--dry-run")
    assert_one_line_error(res, f"{store}.json", "n_tokens 'many' is not a count")


def test_a_store_holding_ids_beyond_the_vocabulary(inputs, tmp_path):
    args, store = copy_store(inputs, tmp_path)
    tokens = np.memmap(store + ".bin", dtype=json.loads(open(store + ".json").read())["dtype"], mode="r+")
    tokens[tokens != tokens[-1]] = len(inputs["vocab"]) + 1   # every id but the </s> separators (sizes right)
    tokens.flush()
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *args, *tiny_args(2))
    assert_one_line_error(res, f"{store}.bin", f"is beyond the vocabulary's {len(inputs['vocab'])} entries")


def test_a_language_given_twice_is_refused_not_half_dropped(inputs, tmp_path):
    en = str(inputs["root"] / "en.train")
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], "--train", "en", en, *tiny_args(2),
                  "--dry-run")
    assert_one_line_error(res, "--train en given twice")


def test_resuming_from_a_checkpoint_that_is_not_a_last_one_and_from_damaged_metrics(inputs, tmp_path):
    run = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(3), check=True)
    last = run / "checkpoints" / "last.pt"
    kept = last.read_bytes()
    shutil.copy(run / "checkpoints" / "best.pt", last)
    res = run_xlt("-q", "pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6))
    assert_one_line_error(res, str(last), "not a run's last checkpoint")
    last.write_bytes(kept)
    metrics = run / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    assert_one_line_error(run_xlt("-q", "pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6)),
                          f"{metrics}:2: not a JSON record")
    # a last line torn by a kill is dropped (the resume writes it again)
    metrics.write_text("\n".join(lines) + '\n{"step": 3, "lo')
    assert MetricsLog(str(metrics)).records() == [json.loads(line) for line in lines]
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6), check=True)


def test_a_truncated_representation_file_given_to_cka(tmp_path):
    for side in ("a", "b"):
        np.save(tmp_path / f"{side}.npy", np.ones((2, 8, 4), dtype=np.float32))
        (tmp_path / f"{side}.json").write_text(json.dumps({"level": "sentence", "layers": [0, 1], "count": 8, "pooling": "mean", "include_specials": False}))
        (tmp_path / f"{side}.txt").write_text("x\n" * 8)
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a.npy").write_bytes(data[:len(data) // 2])
    res = run_xlt("cka", "compare", "--reps-a", tmp_path / "a", "--reps-b", tmp_path / "b", "--label", "x",
                  "--column", "y", "-o", tmp_path / "out")
    assert_one_line_error(res, f"{tmp_path / 'a.npy'}", "not a whole .npy array")


def test_numbers_word2vec_and_numpy_would_stop_on():
    for settings, what in (({"seed": -1}, "--seed must be between 0 and 2^32 - 1"),
                           ({"seed": 2 ** 64}, "--seed must be between 0 and 2^32 - 1"),
                           ({"sample": math.nan}, "--sample at least 0")):
        with pytest.raises(XltError, match=what.replace("^", r"\^")):
            EmbedConfig(**settings)


def refused_at_line(read, path, text: str, message: str, line: int) -> None:
    """``read(path)`` of a file holding ``text`` raises ``message`` at ``line``."""
    path.write_text(text)
    with pytest.raises(XltError, match=message) as error:
        read(str(path))
    assert error.value.line == line


def test_a_tracking_record_without_its_keys(tmp_path):
    refused_at_line(read_records, tmp_path / "records.jsonl",
                    '{"run": "r", "snapshot": "s", "measure": "m", "value": 1}\n{"snapshot": "s", "measure": "m"}\n',
                    "not a tracking record: no 'run' field", 2)


def test_a_results_file_whose_summary_is_not_an_object_is_a_gap(tmp_path):
    path = tmp_path / "default" / "en-fr" / "ner" / "results.json"
    write_results(path, "ner", "fr", seeded("ner", "fr", [30.0, 31.0]))
    data = json.loads(path.read_text())
    data["summary"] = "oops"
    path.write_text(json.dumps(data))
    t = table1.build(str(tmp_path), ["fr"])
    gaps = [c.gap for label, cells in t.rows if label == "Default" for c in cells if c.gap]
    assert any(g == f"damaged result file {path}" for g in gaps)


def test_a_hand_edited_ownership_sidecar(inputs, tmp_path):
    vocab = tmp_path / "vocab"
    shutil.copy(inputs["root"] / "vocab", vocab)
    sidecar = json.loads((inputs["root"] / f"vocab{SIDECAR_SUFFIX}").read_text())
    for change, what in (({"prefix_lang": "yes"}, "'prefix_lang' 'yes' is not true or false"),
                         ({"owners": [None] + sidecar["owners"][1:]}, "owner None is not a set of its 2 languages"),
                         ({"owners": [4] + sidecar["owners"][1:]}, "owner 4 is not a set"),
                         ({"languages": ["en", "en"]}, "'languages' must be distinct")):
        (tmp_path / f"vocab{SIDECAR_SUFFIX}").write_text(json.dumps({**sidecar, **change}))
        with pytest.raises(XltError, match=what):
            Vocabulary.load(vocab)


def test_codeswitch_refuses_its_report_on_its_output(tmp_path):
    (tmp_path / "dict").write_text("cat chat\n")
    (tmp_path / "in.tok").write_text("the cat\n")
    out = tmp_path / "out"
    res = run_xlt("codeswitch", "--dict", tmp_path / "dict", tmp_path / "in.tok", "-o", out, "--report", out)
    assert_one_line_error(res, str(out), "two outputs name the same file")
    assert not out.exists()


def test_task_files_with_two_roots_or_an_empty_word(tmp_path):
    refused_at_line(read_conllu, tmp_path / "two-roots.conllu",
                    "1\tDogs\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n\n",
                    "words 1 and 2 both have head 0", 2)
    refused_at_line(read_tagged, tmp_path / "ner", "John\tB-PER\n\tB-MISC\n", "empty word", 2)


def test_cka_refuses_a_text_beside_the_representations_it_would_leave_unread(tmp_path):
    res = run_xlt("cka", "compare", "--reps-a", tmp_path / "a", "--text-a", tmp_path / "a.txt", "--reps-b",
                  tmp_path / "b", "--label", "x", "--column", "y", "-o", tmp_path / "out")
    assert_one_line_error(res, "--reps-a is side A's representations: --text-a would be ignored")
    res = run_xlt("cka", "compare", "--reps-a", tmp_path / "a", "--reps-b", tmp_path / "b", "--model-b", tmp_path / "m",
                  "--label", "x", "--column", "y", "-o", tmp_path / "out")
    assert_one_line_error(res, "--reps-b is side B's representations: --model-b would be ignored")


@pytest.mark.parametrize("command", [["tokenize", "--lang", "en"], ["bpe", "apply", "--codes", "CODES"],
                                     ["codeswitch", "--dict", "DICT"], ["fake-english"],
                                     ["fake-english", "--format", "conllu"], ["permute-words"]])
@pytest.mark.parametrize("compressed", [False, True])
def test_an_empty_input_to_a_text_filter_is_one_error_line(command, compressed, tmp_path):
    import lzma

    codes, dictionary = tmp_path / "codes", tmp_path / "dict.txt"
    (tmp_path / "words.txt").write_text("abc abd abe\n", encoding="utf-8")
    run_xlt("bpe", "learn", "--merges", "2", "-o", codes, tmp_path / "words.txt", check=True)
    dictionary.write_text("cat chat\n", encoding="utf-8")
    empty = tmp_path / ("empty.txt.xz" if compressed else "empty.txt")
    empty.write_bytes(lzma.compress(b"") if compressed else b"")
    out = tmp_path / "out.txt"
    args = [{"CODES": codes, "DICT": dictionary}.get(a, a) for a in command]
    res = run_xlt(*args, empty, "-o", out)
    assert_one_line_error(res, f"{empty}: empty input: no lines")
    assert not out.exists()
    # blank lines only: an empty corpus too (tokenize, codeswitch and bpe apply wrote them through,
    # and bpe learn or binarize refused it a stage later)
    blank = tmp_path / ("blank.txt.xz" if compressed else "blank.txt")
    blank.write_bytes(lzma.compress(b"\n \n\n") if compressed else b"\n \n\n")
    res = run_xlt(*args, blank, "-o", out)
    assert_one_line_error(res, f"{blank}: empty input: no sentence (every line is blank")
    assert not out.exists()
    # the same command on one sentence writes it through
    one = tmp_path / "one.txt"
    one.write_text("1\tabc\t_\t_\t_\t_\t0\troot\t_\t_\n\n" if "conllu" in command else "abc abd\n", encoding="utf-8")
    res = run_xlt(*args, one, "-o", out)
    assert res.returncode == 0 and out.read_text(), res.stderr
