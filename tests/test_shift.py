"""Language means, the shift file, shift decoding, convert rate and BLEU-1, and ``xlt shift-decode``."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import synthetic
import torch
from conftest import assert_one_line_error, run_xlt

from xlt.analysis.shift import (LanguageShift, bleu1, convert_rate, language_mean, shift_decode, token_set,
                                words_of)
from xlt.model.xlt_run import PretrainedRun
from xlt.text.pipeline import model_input
from xlt.utils.errors import XltError


# ---- metrics on hand-made examples ---------------------------------------------------------------

def test_convert_rate_counts_target_only_tokens_over_non_shared_outputs():
    source, target = {10, 11, 12, 20}, {20, 21, 22}          # 20 is shared
    outputs = [[21, 10, 20, 22], [20, 20, 99, 11]]           # 99: in neither vocabulary
    # target-only: 21, 22 -> 2; outputs 8, shared 3 -> denominator 5
    assert convert_rate(outputs, source, target) == pytest.approx(2 / 5)
    assert convert_rate([[21, 22]], source, target) == 1.0
    assert math.isnan(convert_rate([[20]], source, target))


def test_bleu1_clips_counts_and_applies_the_brevity_penalty():
    hyp = [["le", "le", "le", "chat"], ["un"]]
    ref = [["le", "chat", "dort"], ["un", "chien", "noir"]]
    # clipped matches: le 1 + chat 1 + un 1 = 3 of 5 hypothesis words; c = 5 < r = 6
    assert bleu1(hyp, ref) == pytest.approx(100 * math.exp(1 - 6 / 5) * 3 / 5)
    assert bleu1([["a", "b", "c"]], [["c", "a"]]) == pytest.approx(100 * 2 / 3)  # longer: no penalty
    assert bleu1([[]], [["a"]]) == 0.0


# ---- the model side ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_dir(tiny_run):
    return tiny_run


@pytest.fixture(scope="module")
def run(run_dir):
    return PretrainedRun.load(run_dir)


@pytest.fixture(scope="module")
def shift(run):
    en, fr = synthetic.corpus(30, seed=8)
    return LanguageShift("en", "fr", language_mean(run, "en", en)[0], language_mean(run, "fr", fr)[0], {})


def test_language_mean_is_a_token_mean(run):
    lines = synthetic.corpus(6, seed=1)[0]
    lines[0] += " the big cat ."  # sentences of different lengths: a token mean differs from a mean of means
    mean, tokens = language_mean(run, "en", lines, batch_size=4)
    with torch.no_grad():
        states = [torch.stack(run.model.encoder(torch.tensor([model_input(ids)]), "en",
                                                output_hidden_states=True).hidden_states)[:, 0, 1:-1]
                  for ids in run.text("en").encode_lines(lines)]
    every_token = torch.cat(states, dim=1)                     # [L, tokens, D]
    assert mean.shape == (3, 64) and tokens == every_token.shape[1]
    np.testing.assert_allclose(mean, every_token.mean(1), atol=1e-5)
    mean_of_means = torch.stack([s.mean(1) for s in states]).mean(0)
    assert np.abs(mean - mean_of_means.numpy()).max() > 1e-4


def plain_decode(run, lines, lang="en"):
    with torch.no_grad():
        out = []
        for ids in run.text(lang).encode_lines(lines):
            hidden = run.model.encoder(torch.tensor([model_input(ids)]), lang).last_hidden_state
            out.append(run.model.head.decode(hidden, lang)[0, 1:-1].tolist())
        return out


def test_alpha_zero_leaves_predictions_unchanged(run, shift):
    lines = synthetic.corpus(7, seed=2)[0]
    lines[1] += " a dog ."
    decoded = dict(shift_decode(run, shift, lines, [(0, 0.0), (1, 0.0), (2, 0.0), (1, 3.0)], batch_size=3))
    expected = plain_decode(run, lines)
    for i in range(len(lines)):
        for layer in (0, 1, 2):
            assert decoded[i][(layer, 0.0)] == expected[i]
    assert any(decoded[i][(1, 3.0)] != expected[i] for i in range(len(lines)))


def test_shift_equals_a_layer_hook(run, shift):
    """Adding alpha * D(l) after layer l through encode_from is what a layer_hook at l does."""
    line = "the old cat sees a small bird ."
    ids = torch.tensor([model_input(run.text("en").encode_lines([line])[0])])
    D = torch.as_tensor(shift.difference(1))
    with torch.no_grad():
        hooked = run.model.encoder(ids, "en", layer_hook=lambda l, h: h + 2.5 * D if l == 1 else h).last_hidden_state
        expected = run.model.head.decode(hooked, "en")[0, 1:-1].tolist()
    decoded = dict(shift_decode(run, shift, [line], [(1, 2.5)]))
    assert decoded[0][(1, 2.5)] == expected


def test_shift_file_round_trip_and_checks(run, shift, tmp_path):
    shift.header = {"format": "xlt-shift/1", "src": "en", "tgt": "fr"}
    shift.save(str(tmp_path / "s.npz"))
    loaded = LanguageShift.load(str(tmp_path / "s.npz"))
    assert (loaded.src, loaded.tgt) == ("en", "fr")
    np.testing.assert_array_equal(loaded.difference(2), shift.mean_tgt[2] - shift.mean_src[2])
    with pytest.raises(XltError, match="layer 3 is out of range"):
        loaded.difference(3)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(XltError, match="xlt-shift/1"):
        LanguageShift.load(str(tmp_path / "bad.npz"))


def test_a_hub_models_shift_decodes_with_that_model_only():
    from xlt.analysis.shift import _check_shift_model

    _check_shift_model({"run": "hf:bert-base-multilingual-cased", "step": None}, "hf:bert-base-multilingual-cased",
                       None, "s.npz")
    with pytest.raises(XltError, match="means are of hf:bert-base-multilingual-cased .* the model decoding is "
                                       "hf:xlm-roberta-base"):
        _check_shift_model({"run": "hf:bert-base-multilingual-cased", "step": None}, "hf:xlm-roberta-base", None,
                           "s.npz")


def test_means_pooled_differently_make_no_shift(tmp_path):
    from xlt.model.interventions import save_means

    header = {"format": "xlt-means/1", "run": "r", "step": 10, "sentences": 3, "tokens": 9, "text": "t"}
    means = np.zeros((3, 4), dtype=np.float32)
    save_means(str(tmp_path / "en.npz"), means, {**header, "lang": "en", "include_specials": False})
    save_means(str(tmp_path / "fr.npz"), means + 1, {**header, "lang": "fr", "include_specials": True})
    with pytest.raises(XltError, match="means pooled differently") as err:
        LanguageShift.from_means(str(tmp_path / "en.npz"), str(tmp_path / "fr.npz"))
    assert err.value.path == str(tmp_path / "fr.npz")
    save_means(str(tmp_path / "fr.npz"), means + 1, {**header, "lang": "fr", "include_specials": False})
    made = LanguageShift.from_means(str(tmp_path / "en.npz"), str(tmp_path / "fr.npz"))
    assert made.header["include_specials"] is False and made.difference(1).tolist() == [1.0] * 4


def test_words_and_token_sets(run, tmp_path):
    ids = [run.vocab.index(t) for t in ("le", "chat", ".")]
    assert words_of([1] + ids + [1], run) == ["le", "chat", "."]
    fr = token_set(run, "fr")
    assert run.vocab.index("chat") in fr and run.vocab.index("cat") not in fr and run.vocab.index(".") in fr
    bpe = tmp_path / "fr.bpe"
    bpe.write_text("le chat .\nun chien\n")
    assert token_set(run, "fr", str(bpe)) == {run.vocab.index(t) for t in ("le", "chat", ".", "un", "chien")}
    # a text with no token of the vocabulary would make every prediction a miss: refused
    for content in ("", "\n\n", "zzqx qqzx\n"):
        bpe.write_text(content)
        with pytest.raises(XltError, match="no token of the model's vocabulary for fr in this text"):
            token_set(run, "fr", str(bpe))


# ---- the command ---------------------------------------------------------------------------------

def test_means_shift_translate_table(run_dir, tmp_path):
    en, fr = synthetic.corpus(40, seed=11)
    for name, lines in (("mono.en", en[:30]), ("mono.fr", fr[:30]), ("test.en", en[30:]), ("test.fr", fr[30:])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    for lang in ("en", "fr"):
        res = run_xlt("shift-decode", "means", "--model", run_dir, "--lang", lang, "--n-sentences", "20",
                      tmp_path / f"mono.{lang}", "-o", tmp_path / f"means.{lang}.npz")
        assert res.returncode == 0, res.stderr
    res = run_xlt("shift-decode", "shift", "--src", tmp_path / "means.en.npz", "--tgt", tmp_path / "means.fr.npz",
                  "-o", tmp_path / "shift.npz")
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "shift.npz", allow_pickle=False) as data:
        header = json.loads(str(data["header"]))
        assert data["mean_src"].shape == data["mean_tgt"].shape == (3, 64)
    assert (header["src"], header["tgt"], header["sentences"]) == ("en", "fr", {"en": 20, "fr": 20})

    res = run_xlt("shift-decode", "translate", "--model", run_dir, "--shift", tmp_path / "shift.npz",
                  "--input", tmp_path / "test.en", "--reference", tmp_path / "test.fr", "--alphas", "0,2",
                  "-o", tmp_path / "en-fr.json")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "en-fr.json").read_text())
    assert [(r["layer"], r["alpha"]) for r in result["grid"]] == [(1, 0.0), (1, 2.0), (2, 0.0), (2, 2.0)]
    assert result["best"]["bleu1"] == max(r["bleu1"] for r in result["grid"]) and result["n"] == 10
    res = run_xlt("shift-decode", "table", tmp_path / "en-fr.json", "--layer", "2", "--alpha", "2",
                  "-o", tmp_path / "table2")
    assert res.returncode == 0, res.stderr
    table = json.loads((tmp_path / "table2.json").read_text())
    assert table["rows"][:4] == ["BLEU-1 (layer=2, alpha=2)", "best BLEU-1", "best layer", "best alpha"]
    assert "convert rate (layer=2, alpha=2)" in table["rows"] and (tmp_path / "table2.tsv").exists()
    res = run_xlt("shift-decode", "table", tmp_path / "en-fr.json", tmp_path / "en-fr.json", "--layer", "2",
                  "--alpha", "2", "-o", tmp_path / "twice")
    assert_one_line_error(res, "en-fr.json: the same translate result is given twice")

    short = tmp_path / "short.fr"
    short.write_text("le chat .\n")
    common = ["shift-decode", "translate", "--model", run_dir, "--shift", tmp_path / "shift.npz",
              "--input", tmp_path / "test.en"]
    assert_one_line_error(run_xlt(*common, "--reference", short, "-o", tmp_path / "x.json"),
                          str(tmp_path / "test.en"), str(short))
    assert_one_line_error(run_xlt(*common, "--reference", tmp_path / "test.fr", "--layers", "5",
                                  "-o", tmp_path / "x.json"), "layer 5")
    assert_one_line_error(run_xlt("shift-decode", "means", "--model", run_dir, "--lang", "de",
                                  tmp_path / "mono.en", "-o", tmp_path / "x.npz"), "'de'")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert_one_line_error(run_xlt("shift-decode", "translate", "--model", run_dir, "--shift", tmp_path / "shift.npz",
                                  "--input", empty, "--reference", empty, "-o", tmp_path / "x.json"),
                          str(empty), "no sentences")
    assert_one_line_error(run_xlt(*common, "--reference", tmp_path / "test.fr", "--token-set", "de", short,
                                  "-o", tmp_path / "x.json"), "--token-set for de")
    assert_one_line_error(run_xlt("shift-decode", "shift", "--src", tmp_path / "means.en.npz", "--tgt",
                                  tmp_path / "means.en.npz", "-o", tmp_path / "x.npz"), "both means are of 'en'")
    # another checkpoint's or another run's means decoded, and their BLEU-1 read as this model's
    shift = LanguageShift.load(str(tmp_path / "shift.npz"))
    shift.header["step"] += 1
    shift.save(str(tmp_path / "other-step.npz"))
    other = tmp_path / "other-run"
    shutil.copytree(run_dir, other)
    for model, shift_file in ((run_dir, tmp_path / "other-step.npz"), (other, tmp_path / "shift.npz")):
        res = run_xlt("shift-decode", "translate", "--model", model, "--shift", shift_file, "--input",
                      tmp_path / "test.en", "--reference", tmp_path / "test.fr", "-o", tmp_path / "x.json")
        assert_one_line_error(res, f"{shift_file}: the shift's means are of {os.path.abspath(run_dir)} at step")
    assert not list(tmp_path.glob("x*"))


def test_liu_table2_names_the_model_it_reports_on(tmp_path):
    from xlt.report import liu

    for src, tgt in (("en", "fr"), ("fr", "en")):
        grid = [{"layer": layer, "alpha": a, "bleu1": 1.0, "convert_rate": 0.5} for layer in (1, 2) for a in (1.0, 3.0)]
        (tmp_path / f"{src}-{tgt}.json").write_text(json.dumps(
            {"format": "xlt-shift-decode/1", "src": src, "tgt": tgt, "n": 2, "grid": grid,
             "run": "hf:bert-base-multilingual-cased", "best": {"bleu1": 1.0, "layer": 2, "alpha": 3.0}}))
    table = liu.build_table2(str(tmp_path), languages=["fr"])
    assert table.title.endswith("(model: hf:bert-base-multilingual-cased)"), table.title
