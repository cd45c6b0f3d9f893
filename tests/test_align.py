"""xlt align end to end on a tiny pretrained run of the synthetic grammar, and its one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import synthetic
from conftest import assert_one_line_error, run_in_process, run_xlt

from xlt.analysis.align import AlignSettings, WordSettings, align_contextual_word, align_word
from xlt.analysis.align_parallel import align_dictionary, fit_layer_map, read_parallel
from xlt.analysis.procrustes import unit_length
from xlt.model.interventions import load_map
from xlt.utils.errors import XltError


@pytest.fixture(scope="module")
def run_dir(tiny_run):
    return tiny_run


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("align-data")
    pairs = synthetic.DICTIONARY
    (root / "train.txt").write_text("".join(f"{s} {t}\n" for s, t in pairs[::2]), encoding="utf-8")
    (root / "test.txt").write_text("".join(f"{s}\t{t}\n" for s, t in pairs[1::2]), encoding="utf-8")
    (root / "same.txt").write_text("".join(f"{s} {s}\n" for s, _ in pairs), encoding="utf-8")
    (root / "nowhere.txt").write_text("zzz yyy\nqqq www\n", encoding="utf-8")
    en, fr = synthetic.corpus(160, seed=7)
    for name, lines in (("train.en", en[:120]), ("train.fr", fr[:120]), ("test.en", en[120:]), ("test.fr", fr[120:])):
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "short.fr").write_text("\n".join(fr[:5]) + "\n", encoding="utf-8")
    return root


def sides(run_dir, source="en", target="fr"):
    return ["--model", run_dir, "--source-lang", source, "--target-lang", target]


def test_word_end_to_end(run_dir, data, tmp_path):
    out = tmp_path / "word.json"
    res = run_xlt("align", "word", *sides(run_dir), "--train-dict", data / "train.txt", "--test-dict",
                  data / "test.txt", "-o", out)
    assert res.returncode == 0, res.stderr
    result = json.loads(out.read_text())
    # Every grammar word is one vocabulary token: all pairs usable.
    n_test = len(synthetic.DICTIONARY) // 2
    assert result["train"]["usable"] == result["train"]["pairs"] == len(synthetic.DICTIONARY) - n_test
    assert result["test"]["usable"] == result["test"]["pairs"] == n_test
    scores = result["results"][0]
    for method in ("nn", "csls"):
        assert set(scores[method]) == {"p@1", "p@5", "p@10"}
        assert scores[method]["p@1"] <= scores[method]["p@5"] <= scores[method]["p@10"]
    assert 0 < scores["mrr"] <= 1 and scores["mrr_candidates"] == n_test
    assert "CSLS P@1" in res.stderr  # the table


def test_word_aligning_a_language_with_itself_is_perfect(run_dir, data):
    res = run_xlt("align", "word", *sides(run_dir, "en", "en"), "--train-dict", data / "same.txt", "--test-dict",
                  data / "same.txt", "--subwords", "mean")
    assert res.returncode == 0, res.stderr
    scores = json.loads(res.stdout)["results"][0]
    # (CSLS need not be perfect here: a word with a denser neighbourhood than the query can outscore it.)
    assert scores["nn"]["p@1"] == scores["mrr"] == 1.0


def test_sentence_end_to_end_and_cka_format(run_dir, data, tmp_path):
    out = tmp_path / "sentence.json"
    res = run_xlt("align", "sentence", *sides(run_dir), "--train", data / "train.en", data / "train.fr",
                  "--test", data / "test.en", data / "test.fr", "--layers", "0,2", "-o", out)
    assert res.returncode == 0, res.stderr
    result = json.loads(out.read_text())
    assert result["layers"] == [0, 2] and len(result["p_at_1"]) == 2
    assert all(0 <= p <= 1 for p in result["p_at_1"])
    # Identical sides: each sentence finds itself at every layer.
    same = run_xlt("align", "sentence", *sides(run_dir, "en", "en"), "--train", data / "train.en", data / "train.en",
                   "--test", data / "test.en", data / "test.en")
    assert json.loads(same.stdout)["p_at_1"] == [1.0, 1.0, 1.0]


def test_dictionary_writes_orthogonal_maps(run_dir, data, tmp_path):
    maps = tmp_path / "maps"
    res = run_xlt("align", "dictionary", *sides(run_dir), "--parallel", data / "train.en", data / "train.fr",
                  "--layers", "1,2", "--drop-identical", "-o", maps)
    assert res.returncode == 0, res.stderr
    header = json.loads((maps / "map.json").read_text())
    assert header["layers"] == [1, 2] and header["orientation"] == "x_tgt @ W -> source space"
    assert header["links"] > 5 * 120 and header["identical_dropped"] >= 100  # "." <-> "." dropped
    for layer in (1, 2):
        # Read back the way xlt finetune --map-dir reads it.
        W = load_map(str(maps), layer, "en", d_model=64, n_layers=2).weight.numpy()
        assert np.allclose(W @ W.T, np.eye(64), atol=1e-4)
        means = load_map(str(maps), layer, "en", d_model=64, n_layers=2).means
        assert means is not None and tuple(means.shape) == (2, 64) and header["centred"]
    fit = header["results"][0]
    assert fit["cosine_after"] >= fit["cosine_before"]
    # made again into the same directory, for one layer and uncentred: nothing of the first is left
    res = run_xlt("align", "dictionary", *sides(run_dir), "--parallel", data / "train.en", data / "train.fr",
                  "--layers", "1", "--iternorm-rounds", "0", "-o", maps)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in maps.iterdir()) == ["W_layer1.npy", "map.json"]
    assert load_map(str(maps), 1, "en", d_model=64, n_layers=2).means is None


def test_a_map_is_a_rotation_about_the_two_languages_means():
    # Two models' states share no origin: source = Z R + m_s, target = Z + m_t. W is learned on
    # centred (iteratively normalized) vectors, so only (x - m_t) W + m_s lands on the source; x W
    # about the origin (the hook's mapping before 2026-12-05) misses it by the offsets.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(400, 16))
    R, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    m_s, m_t = rng.normal(size=16), rng.normal(size=16)   # offsets as long as the spread (much longer ones
    # are all but erased by iterative normalization's first unit-length step, which W then turns as it may)
    source, target = (Z @ R + m_s).astype(np.float32), (Z + m_t).astype(np.float32)
    W, means, fit = fit_layer_map(target, source, rounds=5)
    assert np.allclose(means, [target.mean(0), source.mean(0)], atol=1e-5)
    assert np.allclose(W @ W.T, np.eye(16), atol=1e-5)
    # near the source, not on it: iterative normalization's unit lengths bend the fit a little
    assert fit["cosine_after"] > 0.99 and fit["cosine_before"] < 0.1
    about_origin = np.mean(np.sum(unit_length(target @ W) * unit_length(source), 1))
    assert about_origin < 0.5   # 0.26 (over seeds 0-7 of this draw: 0.26-0.74, always under 0.99)
    # without iterative normalization nothing is centred: W turns about the origin, and no means go with it
    _, none, fit = fit_layer_map(target, source, rounds=0)
    assert none is None and fit["cosine_after"] > fit["cosine_before"]


def test_contextual_word_library(run_dir, data):
    result = align_contextual_word(str(run_dir), "en", "fr", str(data / "train.en"), str(data / "train.fr"),
                                   str(data / "train.txt"), str(data / "test.txt"), n_sentences=100,
                                   layers=[0, 2], settings=AlignSettings(block_size=7))
    assert [r["layer"] for r in result["results"]] == [0, 2]
    assert result["test"]["usable"] == len(synthetic.DICTIONARY) // 2 and result["space"]["source_words"] == 24


def test_word_in_the_joint_space_needs_no_training_dictionary(run_dir, data):
    res = run_xlt("align", "word", *sides(run_dir), "--map", "none", "--no-csls", "--test-dict", data / "test.txt")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    scores = result["results"][0]
    assert result["map"] == "none" and result["train"] is None and "csls" not in scores
    assert 0 < scores["mrr"] <= 1 and scores["ranked"]["p@1"] <= scores["ranked"]["p@5"]


def test_contextual_word_joint_space_and_saved_maps(run_dir, data, tmp_path):
    joint = align_contextual_word(str(run_dir), "en", "fr", str(data / "train.en"), str(data / "train.fr"), None,
                                  str(data / "test.txt"), n_sentences=60, layers=[0, 2],
                                  word=WordSettings(map="none", csls=False))
    assert joint["map"] == "none" and [r["layer"] for r in joint["results"]] == [0, 2]
    assert all(0 < r["mrr"] <= 1 for r in joint["results"])
    mapped = align_contextual_word(str(run_dir), "en", "fr", str(data / "train.en"), str(data / "train.fr"),
                                   str(data / "train.txt"), str(data / "test.txt"), n_sentences=60, layers=[0, 2],
                                   word=WordSettings(csls=False, save_map=str(tmp_path / "W.npy")))
    W = np.load(tmp_path / "W.npy")
    assert W.shape == (2, 64, 64) and mapped["saved_map"]["layers"] == [0, 2]
    assert np.allclose(W[1] @ W[1].T, np.eye(64), atol=1e-4)


def test_read_parallel_tsv_columns_and_dedup(tmp_path):
    (tmp_path / "a.tsv").write_text("p1\th1\tx\np1\th2\tx\n", encoding="utf-8")
    (tmp_path / "b.tsv").write_text("q1\tg1\ty\nq1\tg2\ty\n", encoding="utf-8")
    assert read_parallel(str(tmp_path / "a.tsv"), str(tmp_path / "b.tsv"), (1, 2)) == (
        ["p1", "h1", "h2"], ["q1", "g1", "g2"])


def test_errors_are_one_line(run_dir, data, tmp_path, capsys):
    # the first in a real process, the others in this one (a torch import each, ~3 s)
    res = run_xlt("align", "word", *sides(run_dir), "--train-dict", data / "nowhere.txt", "--test-dict",
                  data / "test.txt")
    assert_one_line_error(res, "nowhere.txt", "none of the 2 dictionary pairs")
    res = run_in_process(capsys, "align", "sentence", *sides(run_dir), "--train", data / "train.en",
                         data / "short.fr", "--test", data / "test.en", data / "test.fr")
    assert_one_line_error(res, "differ in length", "train.en", "short.fr")
    res = run_in_process(capsys, "align", "sentence", *sides(run_dir), "--train", data / "train.en",
                         data / "train.fr", "--test", data / "test.en", data / "test.fr", "--layers", "0,3")
    assert_one_line_error(res, "layer 3 is out of range")
    # The same checks in-process (no subprocess start-up): they fail before any work or output.
    with pytest.raises(XltError, match="layer 9 is out of range"):
        align_dictionary(str(run_dir), "en", "fr", str(data / "train.en"), str(data / "train.fr"),
                         str(tmp_path / "maps"), layers=[9])
    assert not (tmp_path / "maps").exists()
    with pytest.raises(XltError, match="'de'"):
        align_word(str(run_dir), "en", "de", str(data / "train.txt"), str(data / "test.txt"))
