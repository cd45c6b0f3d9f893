"""Per-layer representations: every level and pooling against a hand-written forward pass, and ``xlt extract``."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import synthetic
import torch
from conftest import assert_one_line_error, run_in_process, run_xlt

from xlt.analysis.extract import LEVELS, sentence_vectors, sentence_vectors_and_index, token_vectors, word_vectors
from xlt.model.xlt_run import PretrainedRun
from xlt.text.pipeline import model_input
from xlt.utils.errors import XltError


@pytest.fixture(scope="module")
def run_dir(tiny_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("extract")
    # BPE codes with few merges, so that most words split into several subwords (for word pooling).
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(synthetic.corpus(100, seed=2)[0]) + "\n")
    run_xlt("bpe", "learn", "--merges", "12", "-o", root / "codes", corpus, check=True)
    return tiny_run, root / "codes"


@pytest.fixture(scope="module")
def run(run_dir):
    return PretrainedRun.load(run_dir[0])


@pytest.fixture(scope="module")
def sentences():
    en, fr = synthetic.corpus(15, seed=4)
    en[2] = en[2] + " the old cat sees a small bird ."  # lengths differ, so batches are padded
    return en


@torch.no_grad()
def hidden_states(run, lang, ids, model=None):
    """The hand-written reference: one unpadded sentence -> its hidden states [n_layers+1, T, D]."""
    encoder = (model or run.model).encoder
    return torch.stack(encoder(torch.tensor([model_input(ids)]), lang, output_hidden_states=True).hidden_states)[:, 0]


def test_sentence_means_match_a_manual_forward(run, sentences):
    X = sentence_vectors(run, "en", sentences, layers=[2, 0])
    assert X.shape == (2, len(sentences), 64) and X.dtype == np.float32
    with_specials = sentence_vectors(run, "en", sentences, include_specials=True)
    for i, line in enumerate(sentences):
        ids = run.text("en").encode_lines([line])[0]
        states = hidden_states(run, "en", ids)
        np.testing.assert_allclose(X[0, i], states[2, 1:-1].mean(0), atol=1e-5)
        np.testing.assert_allclose(X[1, i], states[0, 1:-1].mean(0), atol=1e-5)
        np.testing.assert_allclose(with_specials[:, i], states.mean(1), atol=1e-5)
    assert np.abs(with_specials[0] - X[1]).max() > 1e-3  # the </s> positions really are left out


def test_layer_zero_is_the_embedding_output(run, sentences):
    ids = run.text("en").encode_lines(sentences[:1])[0]
    with torch.no_grad():
        embedded = run.model.encoder.embed(torch.tensor([model_input(ids)]), "en")[0]
    tokens, index = token_vectors(run, "en", sentences[:1], layers=[0], include_specials=True)
    np.testing.assert_allclose(tokens[0], embedded, atol=1e-6)
    assert index.token_ids.tolist() == model_input(ids)


def test_batching_and_sorting_do_not_change_results(run, sentences):
    one = sentence_vectors(run, "fr", sentences, batch_size=1)
    seven = sentence_vectors(run, "fr", sentences, batch_size=7)
    np.testing.assert_allclose(one, seven, atol=1e-5)
    t1, i1 = token_vectors(run, "en", sentences, batch_size=1)
    t7, i7 = token_vectors(run, "en", sentences, batch_size=7)
    np.testing.assert_allclose(t1, t7, atol=1e-5)
    assert (i1.offsets == i7.offsets).all() and i1.offsets[-1] == sum(len(s.split()) for s in sentences)


def test_word_pooling_first_and_mean(run, run_dir):
    run = PretrainedRun.load(run_dir[0])
    run.text_settings["en"]["codes"] = str(run_dir[1])  # segment words into several subwords
    words = [s.split() for s in synthetic.corpus(9, seed=6)[0]]
    text = run.text("en")
    assert any(len(text.encode_words([w])[0]) > 1 for sentence in words for w in sentence)
    first, index = word_vectors(run, "en", words, pooling="first", batch_size=4)
    mean, mean_index = word_vectors(run, "en", words, pooling="mean", batch_size=3)
    assert first.shape == mean.shape == (3, sum(map(len, words)), 64)
    assert (index.offsets == mean_index.offsets).all()
    for i, sentence in enumerate(words):
        ids, starts = text.encode_words(sentence)
        states = hidden_states(run, "en", ids)
        ends = starts[1:] + [len(ids)]
        rows = index.rows(i)
        for k, (s, e) in enumerate(zip(starts, ends)):
            np.testing.assert_allclose(first[:, rows][:, k], states[:, s + 1], atol=1e-5)
            np.testing.assert_allclose(mean[:, rows][:, k], states[:, s + 1:e + 1].mean(1), atol=1e-5)


def test_truncation_to_the_position_table(run):
    long_line = " ".join(["the cat sees a dog ."] * 100)  # 600 subwords > 512 - 2
    X, sentences = sentence_vectors_and_index(run, "en", ["a cat", long_line], layers=[1])
    assert sentences.truncated_sentences == [1]
    X = X[:, 1:]
    ids = run.text("en").encode_lines([long_line])[0][:510]
    np.testing.assert_allclose(X[0, 0], hidden_states(run, "en", ids)[1, 1:-1].mean(0), atol=1e-5)
    vectors, index = word_vectors(run, "en", [long_line.split(), ["a", "cat"]])
    assert index.counts().tolist() == [510, 2] and index.truncated_sentences == [0] and vectors.shape[1] == 512


def test_truncation_is_recorded_in_the_header_at_every_level(run_dir, tmp_path, capsys):
    long_line = " ".join(["the cat sees a dog ."] * 100)  # 600 subwords > 512 - 2
    text = tmp_path / "in.txt"
    text.write_text(f"the cat .\n{long_line}\na dog .\n{long_line}\n")
    for level in LEVELS:
        res = run_in_process(capsys, "-q", "extract", "--model", run_dir[0], "--lang", "en", "--level", level,
                             "--layers", "0", text, "-o", tmp_path / level)
        assert res.returncode == 0 and res.stderr == "", res.stderr  # -q: the header is the only record
        header = json.loads((tmp_path / f"{level}.json").read_text())
        assert (header["truncated"], header["truncated_lines"]) == (2, [2, 4]), level


def test_another_model_of_the_same_architecture(run, sentences):
    random = run.random_encoder_like(seed=3)
    X = sentence_vectors(run, "en", sentences[:3], layers=[1], model=random)
    ids = run.text("en").encode_lines(sentences[:1])[0]
    np.testing.assert_allclose(X[0, 0], hidden_states(run, "en", ids, random)[1, 1:-1].mean(0), atol=1e-5)
    assert np.abs(X - sentence_vectors(run, "en", sentences[:3], layers=[1])).max() > 1e-2


def test_library_errors(run, sentences):
    with pytest.raises(XltError, match="layer 3 is out of range"):
        sentence_vectors(run, "en", sentences, layers=[0, 3])
    with pytest.raises(XltError, match="not one of this model's"):
        sentence_vectors(run, "de", sentences)
    with pytest.raises(XltError, match="empty sentence"):
        sentence_vectors(run, "en", ["the cat .", ""], source="in.txt")


def test_cli_writes_memmapped_arrays_and_a_header(run, run_dir, sentences, tmp_path):
    text = tmp_path / "en.txt"
    text.write_text("\n".join(sentences) + "\n")
    res = run_xlt("extract", "--model", run_dir[0], "--lang", "en", "--layers", "0,2", text, "-o", tmp_path / "s")
    assert res.returncode == 0, res.stderr
    header = json.loads((tmp_path / "s.json").read_text())
    assert header["layers"] == [0, 2] and header["count"] == len(sentences) and header["step"] == run.step
    assert header["level"] == "sentence" and len(header["input_sha256"]) == 64
    stored = np.load(tmp_path / "s.npy", mmap_mode="r")
    np.testing.assert_allclose(stored, sentence_vectors(run, "en", sentences, layers=[0, 2]), atol=1e-5)

    res = run_xlt("extract", "--model", run_dir[0], "--lang", "en", "--level", "token", text, "-o", tmp_path / "t")
    assert res.returncode == 0, res.stderr
    index = np.load(tmp_path / "t.index.npz")
    assert np.load(tmp_path / "t.npy").shape == (3, index["offsets"][-1], 64)
    assert len(index["token_ids"]) == index["offsets"][-1]


def test_cli_errors_leave_no_output(run_dir, sentences, tmp_path, capsys):
    # the first in a real process, the others in this one (a torch import each, ~3 s)
    text = tmp_path / "en.txt"
    text.write_text("\n".join(sentences) + "\n")
    base = ["extract", "--model", run_dir[0]]
    assert_one_line_error(run_xlt(*base, "--lang", "de", text, "-o", tmp_path / "x"), "'de'")
    assert_one_line_error(run_in_process(capsys, *base, "--lang", "en", "--layers", "0,9", text, "-o", tmp_path / "x"),
                          "layer 9")
    assert_one_line_error(run_in_process(capsys, *base, "--lang", "en", "--layers", "1,1", text, "-o", tmp_path / "x"),
                          "--layers names a layer twice: '1,1'")   # else two rows reported as two layers
    assert_one_line_error(run_in_process(capsys, *base, "--lang", "en", tmp_path / "missing.txt", "-o",
                                         tmp_path / "x"), "missing.txt")
    assert_one_line_error(run_in_process(capsys, *base, "--lang", "en", "--pooling", "mean", text, "-o", tmp_path / "x"),
                          "--pooling pools a word's subwords and --level is sentence")   # it would be ignored
    assert_one_line_error(run_in_process(capsys, *base, "--lang", "en", "--level", "word", "--include-specials", text,
                                         "-o", tmp_path / "x"), "--include-specials is for --level sentence or token")
    assert not list(tmp_path.glob("x*"))


def test_a_full_disk_under_the_memmap_is_one_line_not_a_bus_error(run_dir, tmp_path, capsys, monkeypatch):
    # The vectors are a memmap made at full size; on a full disk its pages failed only when written
    # back, a SIGBUS (exit 135, temporaries left). Their blocks are now allocated first, and that
    # allocation is where a full disk answers (measured on a 64 KiB tmpfs: the one line, nothing left).
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    text = tmp_path / "in.txt"
    text.write_text("the cat sees a dog .\n" * 20)
    for level in LEVELS:
        res = run_in_process(capsys, "-q", "extract", "--model", run_dir[0], "--lang", "en", "--level", level,
                             text, "-o", tmp_path / "reps")
        assert_one_line_error(res, f"{tmp_path / 'reps.npy'}: cannot write (No space left on device)")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"], level
