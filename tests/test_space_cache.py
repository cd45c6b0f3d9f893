"""``xlt align contextual-word --space-cache``: a cached space is the computed one, bit for bit, and
is used only for what it was computed from."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_in_process

import xlt.analysis.align as align_module
from xlt.analysis.align import AlignSettings, WordSettings, align_contextual_word
from xlt.analysis.space_cache import cached_space, space_key, space_path
from xlt.model.protocol import load_text_model
from xlt.utils.errors import XltError

JOINT = WordSettings(map="none", csls=False)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    import synthetic

    root = tmp_path_factory.mktemp("space-cache")
    en, fr = synthetic.corpus(80, seed=3)
    (root / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (root / "fr.txt").write_text("\n".join(fr) + "\n", encoding="utf-8")
    (root / "test.txt").write_text("".join(f"{s} {t}\n" for s, t in synthetic.DICTIONARY), encoding="utf-8")
    (root / "fr-en.txt").write_text("".join(f"{t} {s}\n" for s, t in synthetic.DICTIONARY), encoding="utf-8")
    return root


def score(run, corpora, source="en", target="fr", cache=None, dictionary="test.txt", **options):
    return align_contextual_word(str(run), source, target, str(corpora / f"{source}.txt"),
                                 str(corpora / f"{target}.txt"), None, str(corpora / dictionary), word=JOINT,
                                 n_sentences=options.pop("n_sentences", 60), space_cache=cache,
                                 settings=AlignSettings(device="cpu"), **options)


def test_a_cached_space_is_the_computed_one_and_serves_either_side(tiny_run, corpora, tmp_path, monkeypatch):
    fresh = score(tiny_run, corpora)
    first = score(tiny_run, corpora, cache=str(tmp_path))
    assert {side: first["space_cache"][side]["hit"] for side in ("source", "target")} == {"source": False,
                                                                                          "target": False}
    assert len(list(tmp_path.glob("*.npz"))) == 2

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran although both spaces were cached")

    monkeypatch.setattr(align_module, "word_vectors", no_model)
    again = score(tiny_run, corpora, cache=str(tmp_path))
    assert again["space_cache"]["source"]["hit"] and again["space_cache"]["target"]["hit"]
    assert again["results"] == fresh["results"] == first["results"] and again["test"] == fresh["test"]
    # A space belongs to its language, not to a side: fr -> en reads the same two files.
    swapped = score(tiny_run, corpora, source="fr", target="en", cache=str(tmp_path), dictionary="fr-en.txt")
    assert swapped["space_cache"]["source"]["file"] == first["space_cache"]["target"]["file"]
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_anything_the_space_depends_on_is_another_entry(tiny_run, corpora, tmp_path):
    run = load_text_model(str(tiny_run), "best", "cpu")
    assert run.weights_sha256() == load_text_model(str(tiny_run), "best", "cpu").weights_sha256()
    assert run.weights_sha256() != run.random_like(1).weights_sha256()
    base = dict(model_identity=run.describe(), weights_sha256=run.weights_sha256(), lang="en", corpus_sha256="c" * 64,
                n_sentences=60, max_words=1000, layers=[0, 2], pooling="mean")
    paths = {space_path(str(tmp_path), space_key(**base))}
    for name, other in (("weights_sha256", "0" * 64), ("corpus_sha256", "d" * 64), ("n_sentences", 61),
                        ("max_words", 999), ("layers", [0, 1]), ("pooling", "first"), ("lang", "fr"),
                        ("batch_size", 8), ("device", "cuda")):
        paths.add(space_path(str(tmp_path), space_key(**{**base, name: other})))
    assert len(paths) == 10
    # Through the command: another sentence count or other layers compute a new space.
    score(tiny_run, corpora, cache=str(tmp_path), layers=[0, 2])
    score(tiny_run, corpora, cache=str(tmp_path), layers=[0, 2], n_sentences=40)
    score(tiny_run, corpora, cache=str(tmp_path), layers=[1])
    assert len(list(tmp_path.glob("*.npz"))) == 6


def test_a_damaged_or_foreign_entry_is_computed_again(tmp_path):
    key = space_key({"source": "m"}, "a" * 64, "en", "b" * 64, 10, 100, [0], "mean")
    calls = []

    def compute():
        calls.append(1)
        return ["le", "chat"], np.arange(6, dtype=np.float32).reshape(1, 2, 3)

    path = space_path(str(tmp_path), key)
    (tmp_path / path.split("/")[-1]).write_bytes(b"not a zip")
    (words, vectors), record = cached_space(str(tmp_path), key, compute)
    assert calls == [1] and record == {"file": path, "hit": False}
    (words, vectors), record = cached_space(str(tmp_path), key, compute)
    assert calls == [1] and record["hit"] and words == ["le", "chat"] and vectors.dtype == np.float32
    assert np.array_equal(vectors, np.arange(6, dtype=np.float32).reshape(1, 2, 3))
    # Another key written under this name (a hash collision, a hand-copied file) is not trusted.
    other = {**key, "n_sentences": 11}
    (words, vectors), record = cached_space(str(tmp_path), other, compute)
    assert calls == [1, 1] and not record["hit"]
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_cache_requests_are_one_error_line(tiny_run, corpora, tmp_path, capsys):
    common = ["align", "contextual-word", "--model", tiny_run, "--source-lang", "en", "--target-lang", "fr",
              "--map", "none", "--no-csls", "--test-dict", corpora / "test.txt", "--device", "cpu"]
    res = run_in_process(capsys, *common, "--source-corpus", "-", "--target-corpus", corpora / "fr.txt",
                         "--space-cache", tmp_path / "spaces")
    assert_one_line_error(res, "--space-cache", "not -")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    res = run_in_process(capsys, *common, "--source-corpus", corpora / "en.txt", "--target-corpus",
                         corpora / "fr.txt", "--space-cache", tmp_path / "file", "-o", tmp_path / "out.json")
    assert_one_line_error(res, "--space-cache", "is a file")
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(XltError, match="cannot make the space cache directory"):  # below a file: found by the library
        cached_space(str(tmp_path / "file" / "spaces"), space_key({}, "", "en", "", 1, 1, [0], "mean"), list)
    res = run_in_process(capsys, *common, "--source-corpus", corpora / "en.txt", "--target-corpus",
                         corpora / "fr.txt", "--n-sentences", 30, "--space-cache", tmp_path / "spaces",
                         "-o", tmp_path / "out.json")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out.json").read_text())["space_cache"]["target"]["hit"] is False
