"""Bad files and bad settings are one error line before any work: unreadable checkpoints, pretraining
settings the loop cannot run with, too small retrieval spaces, sentence counts below one; and the
run directory's copies of the vocabulary and codes are replaced atomically, or not at all on resume."""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np
import pytest
import synthetic
import torch
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args

from xlt.analysis.align import AlignSettings, word_translation
from xlt.analysis.cka_compare import CompareSettings
from xlt.analysis.shift import TranslateSettings, compute_means
from xlt.model.checkpoint_io import load_checkpoint
from xlt.pretrain.config import PretrainConfig
from xlt.model.xlt_run import PretrainedRun
from xlt.utils.errors import XltError

LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 426381\n")


# ---- 1. checkpoints that are not xlt's -----------------------------------------------------------

def _not_a_checkpoint(kind: str, path) -> None:
    if kind == "lfs-pointer":
        path.write_text(LFS_POINTER, encoding="utf-8")
    elif kind == "text":
        path.write_text("hello world\n", encoding="utf-8")
    elif kind == "random-bytes":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif kind == "torch-list":
        torch.save([1, 2, 3], path)
    elif kind == "dict-without-model":
        torch.save({"step": 3}, path)
    elif kind == "model-not-a-dict":
        torch.save({"model": [0], "model_config": {}, "vocab_sha256": "0" * 64}, path)


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    """A private copy of the shared tiny run, so a test may damage its checkpoint."""
    return shutil.copytree(tiny_run, tmp_path / "run")


@pytest.mark.parametrize("kind", ["lfs-pointer", "text", "random-bytes", "torch-list"])
def test_load_checkpoint_refuses_what_is_not_a_checkpoint_dict(kind, tmp_path):
    path = tmp_path / "best.pt"
    _not_a_checkpoint(kind, path)
    with pytest.raises(XltError, match="cannot read checkpoint") as err:
        load_checkpoint(path)
    assert err.value.path == str(path)


@pytest.mark.parametrize("kind", ["dict-without-model", "model-not-a-dict", "torch-list"])
def test_pretrained_run_needs_the_keys_it_reads(kind, run_copy):
    _not_a_checkpoint(kind, run_copy / "checkpoints" / "best.pt")
    with pytest.raises(XltError, match="cannot read checkpoint"):
        PretrainedRun.load(run_copy)


@pytest.mark.parametrize("kind,says", [("lfs-pointer", "git lfs pull"), ("random-bytes", "cannot read checkpoint"),
                                       ("torch-list", "holds a list")])
def test_cli_names_the_unreadable_checkpoint(kind, says, run_copy, tmp_path):
    ckpt = run_copy / "checkpoints" / "best.pt"
    _not_a_checkpoint(kind, ckpt)
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n", encoding="utf-8")
    out = tmp_path / "means.npz"
    res = run_xlt("shift-decode", "means", "--model", run_copy, "--lang", "en", text, "-o", out)
    assert_one_line_error(res, str(ckpt), "cannot read checkpoint", says)
    assert not out.exists()


@pytest.mark.parametrize("text_settings, says", [([1, 2], "expected an object: language -> its settings"),
                                                  ({}, "expected an object: language -> its settings"),
                                                  ({"en": "x", "fr": {}}, "language 'en': its text settings are a str"),
                                                  ({"en": {"codes": 5}, "fr": {}}, "language 'en': codes is a int")])
def test_a_damaged_text_json_is_one_error_line(text_settings, says, run_copy, tmp_path):
    import json

    (run_copy / "text.json").write_text(json.dumps(text_settings), encoding="utf-8")
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n", encoding="utf-8")
    out = tmp_path / "means.npz"
    res = run_xlt("shift-decode", "means", "--model", run_copy, "--lang", "en", text, "-o", out)
    assert_one_line_error(res, str(run_copy / "text.json"), says)
    assert not out.exists()


# ---- 2. pretraining settings -------------------------------------------------------------------

BAD_PRETRAIN = [("eval-every", "0"), ("log-every", "0"), ("save-every", "0"), ("max-steps", "0"), ("lr", "0"),
                ("lr", "-1e-4"), ("warmup-steps", "-5"), ("warmup-init-lr", "0"), ("warmup-init-lr", "1e-2"),
                ("eval-batches", "0"), ("weight-decay", "-1"), ("clip-norm", "-1"), ("precision", "fp8"),
                ("lr", "inf"), ("lang-alpha", "nan"), ("lang-alpha", "-1"), ("seed", "-1"), ("stream-len", "0"),
                ("batch-size", "0"), ("max-sentences", "0")]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("bad-settings-inputs"), n_train=60, n_dev=10)


@pytest.mark.parametrize("option,value", BAD_PRETRAIN)
def test_pretrain_refuses_settings_it_cannot_run_before_writing(option, value, inputs, tmp_path):
    run_dir = tmp_path / "run"
    # The bad value comes last, so it overrides the tiny settings.
    res = run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(2), f"--{option}", value)
    assert_one_line_error(res, f"--{option} must be")
    assert not run_dir.exists()


def test_pretrain_config_accepts_the_edges_and_a_changed_copy_is_checked_again():
    cfg = PretrainConfig(vocab="v", train={"en": "t"}, dev={"en": "d"}, max_steps=1, eval_every=1, save_every=1,
                         log_every=1, warmup_steps=0, lr=1e-3, warmup_init_lr=1e-3)
    with pytest.raises(XltError, match="--eval-every must be at least 1"):  # frozen: a change is a new config
        dataclasses.replace(cfg, eval_every=0)


def test_adam_betas_outside_zero_one_are_refused(inputs, tmp_path):
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2), "--adam-betas", "1.5", "0.2")
    assert_one_line_error(res, "--adam-betas must be in [0, 1)")
    assert not (tmp_path / "run").exists()


def _swap(args: list[str], option: str, lang: str, value: str) -> list[str]:
    """``args`` with the value of ``option lang VALUE`` replaced."""
    out = list(args)
    for i in range(len(out) - 2):
        if out[i] == option and out[i + 1] == lang:
            out[i + 2] = value
    return out


def test_inputs_that_do_not_fit_together_are_refused_before_the_run_directory_exists(inputs, tmp_path):
    root, args = inputs["root"], inputs["args"]
    bad_codes = tmp_path / "codes.en"
    bad_codes.write_text("a b\nc\n", encoding="utf-8")
    cases = [
        (_swap(_swap(args, "--train", "en", str(root / "fr.train")), "--train", "fr", str(root / "en.train")),
         "holds 'fr' text, given as 'en'"),
        ([*args, "--dev", "de", str(root / "fr.dev")], "--dev de: not a training language"),
        ([*args, "--codes", "de", str(bad_codes)], "--codes de: not a training language"),
        ([*args, "--codes", "en", str(bad_codes)], "malformed codes line"),
        ([*args, "--codes", "en", str(tmp_path / "missing")], "no such codes file"),
    ]
    for case_args, says in cases:
        res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *case_args, *tiny_args(2))
        assert_one_line_error(res, says)
        assert not (tmp_path / "run").exists(), says


def test_a_failed_attempt_with_other_settings_does_not_block_the_run(inputs, tmp_path):
    """An attempt that stopped before its first checkpoint leaves nothing to resume: the run starts over."""
    run = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(2), check=True)
    (run / "checkpoints" / "last.pt").unlink()
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(2, lr="5e-4"), check=True)
    assert '"lr": 0.0005' in (run / "config.json").read_text()


# ---- 3. word translation with fewer target words than P@10 ranks ----------------------------------

def test_word_translation_needs_ten_target_words():
    rng = np.random.default_rng(0)
    # 10 words is too few as well: over exactly 10 candidates P@10 is 1 whatever the space
    for n in (8, 10):
        source, target = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
        pairs = np.array([[i, i] for i in range(n)])
        with pytest.raises(XltError, match=f"the target space has only {n} words: P@10 needs more than 10"):
            word_translation(source, target, pairs[:5], pairs[5:], AlignSettings())


def test_cli_align_contextual_word_with_a_tiny_target_space(tiny_run, tmp_path):
    en, fr = synthetic.corpus(3, seed=3)
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "fr.txt").write_text("\n".join(fr) + "\n", encoding="utf-8")
    dictionary = synthetic.write_dictionary(tmp_path / "dict.txt")
    out = tmp_path / "cword.json"
    res = run_xlt("align", "contextual-word", "--model", tiny_run, "--source-lang", "en", "--target-lang", "fr",
                  "--source-corpus", tmp_path / "en.txt", "--target-corpus", tmp_path / "fr.txt", "--max-words", "6",
                  "--layers", "0", "--train-dict", dictionary, "--test-dict", dictionary, "-o", out)
    assert_one_line_error(res, "the target space has only 6 words", "P@10")
    assert not out.exists()


# ---- 4. sentence counts below one ------------------------------------------------------------------

def _assert_click_rejects(res, option: str) -> None:
    assert_one_line_error(res, f"Invalid value for '{option}'", "--help)")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_cli_cka_compare_rejects_n_sentences_below_one(n, tiny_run, tmp_path):
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n" * 5, encoding="utf-8")
    res = run_xlt("cka", "compare", "--model-a", tiny_run, "--lang-a", "en", "--text-a", text, "--lang-b", "en",
                  "--text-b", text, "--n-sentences", n, "-o", tmp_path / "col")
    _assert_click_rejects(res, "--n-sentences")
    assert not (tmp_path / "col.json").exists()


@pytest.mark.parametrize("n", ["0", "-3"])
def test_cli_shift_decode_means_rejects_n_sentences_below_one(n, tiny_run, tmp_path):
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n" * 5, encoding="utf-8")
    res = run_xlt("shift-decode", "means", "--model", tiny_run, "--lang", "en", "--n-sentences", n, text,
                  "-o", tmp_path / "means.npz")
    _assert_click_rejects(res, "--n-sentences")
    assert not (tmp_path / "means.npz").exists()


def test_cli_align_contextual_word_rejects_n_sentences_below_one(tiny_run, tmp_path):
    res = run_xlt("align", "contextual-word", "--model", tiny_run, "--source-lang", "en", "--target-lang", "fr",
                  "--source-corpus", tmp_path / "en.txt", "--target-corpus", tmp_path / "fr.txt",
                  "--n-sentences", "-1", "--train-dict", tmp_path / "d", "--test-dict", tmp_path / "d")
    _assert_click_rejects(res, "--n-sentences")


@pytest.mark.parametrize("n", [0, -3])
def test_library_settings_reject_n_sentences_below_one(n, tiny_run, tmp_path):
    with pytest.raises(XltError, match="--n-sentences must be at least 1"):
        CompareSettings(n_sentences=n)
    with pytest.raises(XltError, match="--n-sentences must be at least 1"):
        TranslateSettings(n_sentences=n)
    text = tmp_path / "en.txt"
    text.write_text("the cat sees a dog .\n", encoding="utf-8")
    with pytest.raises(XltError, match="--n-sentences must be at least 1"):
        compute_means(str(tiny_run), "en", str(text), str(tmp_path / "means.npz"), n_sentences=n)
    assert not (tmp_path / "means.npz").exists()


def test_an_empty_shift_grid_is_refused_before_decoding():
    with pytest.raises(XltError, match="--alphas needs at least one"):
        TranslateSettings(alphas=())
    with pytest.raises(XltError, match="--layers needs at least one"):
        TranslateSettings(layers=[])


# ---- 5. the run directory's copies of the vocabulary and codes ---------------------------------------

def test_starting_over_keeps_identical_copies_and_replaces_changed_ones_atomically(inputs, tmp_path):
    codes = tmp_path / "codes.en"
    codes.write_text("t h 10\n", encoding="utf-8")
    run = tmp_path / "run"
    common = ["pretrain", "--run-dir", run, *inputs["args"], "--codes", "en", codes]
    run_xlt(*common, *tiny_args(1), check=True)
    vocab_before = os.stat(run / "vocab")
    # A reader holding the old codes (a hard link stands for an open file) must keep the old bytes.
    os.link(run / "codes.en", tmp_path / "reader-view")
    codes.write_text("t h 10\nth e 9\n", encoding="utf-8")
    # other codes: no resume (tests/test_pretrain.py); a run stopped before its first checkpoint starts over
    assert run_xlt(*common, *tiny_args(2)).returncode == 2
    (run / "checkpoints" / "last.pt").unlink()

    run_xlt(*common, *tiny_args(2), check=True)

    vocab_after = os.stat(run / "vocab")
    assert (vocab_after.st_ino, vocab_after.st_mtime_ns) == (vocab_before.st_ino, vocab_before.st_mtime_ns)
    assert (run / "codes.en").read_text(encoding="utf-8") == "t h 10\nth e 9\n"
    assert (tmp_path / "reader-view").read_text(encoding="utf-8") == "t h 10\n"
    assert not [name for name in os.listdir(run) if name.endswith(".tmp")]


# ---- 6. damaged result files: one error line from the table commands, a gap in the report ---------------

DAMAGED_CKA = [{"label": "Bilingual", "column": "en-fr"},                                  # no layers/values
               {"label": "Bilingual", "column": "en-fr", "layers": [0, 1], "cka": [0.5], "average": 0.5},
               {"label": "Bilingual", "column": "en-fr", "layers": [0], "cka": ["x"], "average": 0.5},
               {"column": "en-fr", "layers": [0], "cka": [0.5], "average": 0.5},
               *({"label": "Bilingual", "column": "en-fr", "layers": [0], "cka": [0.5], "average": 0.5,
                  "retrieval": retrieval} for retrieval in (5, ["x"], {"pearson": "x"})),
               {"label": "Bilingual", "column": "en-fr", "layers": [{}], "cka": [0.5], "average": 0.5},
               {"label": "Bilingual", "column": "en-fr", "layers": [0], "cka": [0.5], "average": 0.5, "n": "40"}]


@pytest.mark.parametrize("damage", DAMAGED_CKA)
def test_a_damaged_cka_column_is_one_error_line_in_cka_table_and_a_gap_in_the_report(damage, tmp_path):
    import json

    from xlt.analysis.cka_files import COLUMN_FORMAT

    (tmp_path / "cka").mkdir()
    column = tmp_path / "cka" / "en-fr.bilingual.json"
    column.write_text(json.dumps({"format": COLUMN_FORMAT, **damage}), encoding="utf-8")
    res = run_xlt("cka", "table", column, "-o", tmp_path / "fig7")
    assert_one_line_error(res, str(column), "malformed CKA column")
    assert not list(tmp_path.glob("fig7*"))
    res = run_xlt("report", "figure7", "--results-dir", tmp_path / "cka", "--langs", "fr", "-o", tmp_path / "report")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "malformed CKA column" in res.stderr


@pytest.mark.parametrize("damage", [{}, {"grid": []}, {"grid": [{"layer": 1}], "best": {}},
                                    {"grid": [{"layer": 1, "alpha": 1.0, "bleu1": 3.0, "convert_rate": "x"}],
                                     "best": {"layer": 1, "alpha": 1.0, "bleu1": 3.0}},
                                    {"grid": [{"layer": 1, "alpha": 1.0, "bleu1": 3.0}],
                                     "best": {"layer": 1, "alpha": 1.0, "bleu1": 3.0}}])
def test_a_damaged_shift_decode_result_is_one_error_line(damage, tmp_path):
    import json

    from xlt.analysis.shift_table import RESULT_FORMAT

    result = tmp_path / "en-fr.json"
    result.write_text(json.dumps({"format": RESULT_FORMAT, "src": "en", "tgt": "fr", **damage}), encoding="utf-8")
    res = run_xlt("shift-decode", "table", result, "--layer", "1", "--alpha", "1", "-o", tmp_path / "table")
    assert_one_line_error(res, str(result), "malformed shift-decode result")
    assert not list(tmp_path.glob("table*"))


# ---- 7. settings and files found out before the work, not after it ----------------------------------------

def test_settings_checked_before_any_encoding(tiny_run, tmp_path):
    from xlt.analysis.align import AlignSettings
    from xlt.analysis.cka_compare import Side, compare
    from xlt.text.anchors import anchor_report
    from xlt.text.bpe import learn
    from xlt.text.vocab import Vocabulary

    for name, value in (("csls_k", 0), ("csls_k", -3), ("block_size", 0), ("iternorm_rounds", -1)):
        with pytest.raises(XltError, match=f"--{name.replace('_', '-')} must be at least"):
            AlignSettings(**{name: value})
    with pytest.raises(XltError, match="'a b' is not a language code"):
        Vocabulary(["x"], [1], languages=["a b"], owners=[1])
    with pytest.raises(XltError, match="between 1 and 2\\^31 - 1"):
        learn([str(tmp_path / "never-read")], 2 ** 40)
    for lang in ("en", "fr"):
        Vocabulary(["a", "b"], [0, 0]).save(tmp_path / f"vocab.{lang}")
    with pytest.raises(XltError, match="every count is 0") as err:
        anchor_report([("en", tmp_path / "vocab.en"), ("fr", tmp_path / "vocab.fr")])
    assert str(err.value.path) == str(tmp_path / "vocab.en")

    one = tmp_path / "one.txt"
    one.write_text("the cat sees a dog .\n", encoding="utf-8")
    with pytest.raises(XltError, match="at least 2 parallel sentences"):
        compare(Side(run=str(tiny_run), lang="en", text=str(one)), Side(run=str(tiny_run), lang="fr", text=str(one)),
                CompareSettings(), "en-fr", "Bilingual")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n", encoding="utf-8")
    with pytest.raises(XltError, match="the text is empty or blank") as err:
        compute_means(str(tiny_run), "en", str(blank), str(tmp_path / "means.npz"))
    assert str(err.value.path) == str(blank) and not (tmp_path / "means.npz").exists()


def test_a_recipe_whose_files_are_not_objects_is_one_error(tmp_path, monkeypatch):
    import json

    from xlt.data.recipes import load_recipes

    (tmp_path / "bad.json").write_text(json.dumps({"name": "bad", "title": "t", "licence": "l", "official_url": "u",
                                                   "in_all": False, "files": ["data/x.txt"]}), encoding="utf-8")
    with pytest.raises(XltError, match="'files' must be a list of objects") as err:
        load_recipes(tmp_path)
    assert str(err.value.path) == str(tmp_path / "bad.json")
