"""``xlt align contextual-word --space-cache``: a cached space is the computed one, bit for bit, and
is used only for what it was computed from."""

from __future__ import annotations

import fcntl
import json
import shutil
import threading

import numpy as np
import pytest
from conftest import assert_one_line_error, run_in_process

import xlt.analysis.align as align_module
from xlt.analysis.align import AlignSettings, WordSettings, align_contextual_word, cached_contextual_space
from xlt.analysis.space_cache import _write, cached_space, pipeline_sha256, space_key, space_path
from xlt.loader.text_model import load_text_model
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


def score(run, corpora, source="en", target="fr", cache=None, dictionary="test.txt", batch_size=32, **options):
    return align_contextual_word(str(run), source, target, str(corpora / f"{source}.txt"),
                                 str(corpora / f"{target}.txt"), None, str(corpora / dictionary), word=JOINT,
                                 n_sentences=options.pop("n_sentences", 60), space_cache=cache,
                                 settings=AlignSettings(device="cpu", batch_size=batch_size), **options)


def a_key(**changes) -> dict:
    given = {**dict(model_identity={"source": "m"}, weights_sha256="a" * 64, pipeline="p" * 64, lang="en",
                    corpus_sha256="b" * 64, n_sentences=10, max_words=100, layers=[0], pooling="mean",
                    batch_size=32, device="cpu"), **changes}
    model = {"model": given.pop("model_identity"), "weights_sha256": given.pop("weights_sha256"),
             "pipeline_sha256": given.pop("pipeline")}
    return space_key(model, **given)


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
    paths = {space_path(str(tmp_path), a_key())}
    for name, other in (("model_identity", {"source": "n"}), ("weights_sha256", "0" * 64), ("pipeline", None),
                        ("corpus_sha256", "d" * 64), ("n_sentences", 11), ("max_words", 99), ("layers", [0, 1]),
                        ("pooling", "first"), ("lang", "fr"), ("batch_size", 8), ("device", "cuda")):
        paths.add(space_path(str(tmp_path), a_key(**{name: other})))
    assert len(paths) == 12
    # The text pipeline is the run directory's own files, not its checkpoints or logs.
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    assert pipeline_sha256(str(copy)) == pipeline_sha256(str(tiny_run)) is not None
    with open(copy / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write("{}\n")
    assert pipeline_sha256(str(copy)) == pipeline_sha256(str(tiny_run))
    with open(copy / "text.json", "a", encoding="utf-8") as f:
        f.write("\n")
    assert pipeline_sha256(str(copy)) != pipeline_sha256(str(tiny_run)) and pipeline_sha256("hf:bert") is None
    # Through the command: what align.py passes on reaches the key.
    cache = tmp_path / "spaces"
    score(tiny_run, corpora, cache=str(cache), layers=[0, 2])
    for options in (dict(n_sentences=40), dict(layers=[1]), dict(batch_size=8)):
        again = score(tiny_run, corpora, cache=str(cache), layers=options.pop("layers", [0, 2]), **options)
        assert not again["space_cache"]["source"]["hit"] and not again["space_cache"]["target"]["hit"]
    assert len(list(cache.glob("*.npz"))) == 8


def test_a_hit_is_the_computed_array(tiny_run, corpora, tmp_path):
    run = load_text_model(str(tiny_run), "best", "cpu")
    args = (run, "fr", str(corpora / "fr.txt"), 60, 1000, [0, 1, 2], "mean", AlignSettings(device="cpu"))
    fresh, none = cached_contextual_space(*args, None)
    missed, first = cached_contextual_space(*args, str(tmp_path))
    hit, second = cached_contextual_space(*args, str(tmp_path))
    assert none is None and not first["hit"] and second["hit"] and first["file"] == second["file"]
    assert fresh.words == missed.words == hit.words and hit.vectors.dtype == np.float32
    assert np.array_equal(fresh.vectors, hit.vectors) and np.array_equal(missed.vectors, hit.vectors)


def test_a_damaged_or_foreign_entry_is_computed_again(tmp_path, monkeypatch, capsys):
    key = a_key()
    calls = []

    def compute():
        calls.append(1)
        return ["le", "chat"], np.arange(6, dtype=np.float32).reshape(1, 2, 3)

    path = space_path(str(tmp_path), key)
    with open(path, "wb") as f:
        f.write(b"not a zip")
    (words, vectors), record = cached_space(str(tmp_path), key, compute)
    assert calls == [1] and record == {"file": path, "hit": False}
    (words, vectors), record = cached_space(str(tmp_path), key, compute)
    assert calls == [1] and record["hit"] and words == ["le", "chat"] and vectors.dtype == np.float32
    assert np.array_equal(vectors, np.arange(6, dtype=np.float32).reshape(1, 2, 3))
    # Another key's entry under this key's name (a hash collision, a hand-copied file) is not trusted.
    other = a_key(n_sentences=11)
    shutil.copy(path, space_path(str(tmp_path), other))
    (words, vectors), record = cached_space(str(tmp_path), other, compute)
    assert calls == [1, 1] and not record["hit"]
    assert not list(tmp_path.glob("*.tmp"))

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    # A write that fails after the work (a full disk) leaves the space computed and says so.
    monkeypatch.setattr("xlt.analysis.space_cache._write", full_disk)
    (words, vectors), record = cached_space(str(tmp_path), a_key(n_sentences=12), compute)
    assert calls == [1, 1, 1] and record == {"file": None, "hit": False} and words == ["le", "chat"]
    assert "No space left on device" in capsys.readouterr().err


def test_a_process_wanting_an_entry_being_computed_waits_and_reads_it(tmp_path, monkeypatch):
    key = a_key()
    path = space_path(str(tmp_path), key)
    waiting, outcome = threading.Event(), {}

    def note(message):
        if "waiting for another process" in message:
            waiting.set()

    monkeypatch.setattr("xlt.analysis.space_cache.log.info", note)

    def compute():
        raise AssertionError("computed although another process was computing it")

    def want_it():
        outcome["result"] = cached_space(str(tmp_path), key, compute)

    with open(path + ".lock", "a") as held:  # this test is the other process
        fcntl.flock(held, fcntl.LOCK_EX)
        other = threading.Thread(target=want_it)
        other.start()
        assert waiting.wait(60), "the second process did not wait for the lock"
        _write(path, key, ["chat"], np.ones((1, 1, 2), dtype=np.float32))
        fcntl.flock(held, fcntl.LOCK_UN)
    other.join(60)
    (words, vectors), record = outcome["result"]
    assert record["hit"] and words == ["chat"] and np.array_equal(vectors, np.ones((1, 1, 2), dtype=np.float32))


def test_bad_cache_requests_are_one_error_line(tiny_run, corpora, tmp_path, capsys):
    common = ["align", "contextual-word", "--model", tiny_run, "--source-lang", "en", "--target-lang", "fr",
              "--map", "none", "--no-csls", "--test-dict", corpora / "test.txt", "--device", "cpu"]
    res = run_in_process(capsys, *common, "--source-corpus", "-", "--target-corpus", corpora / "fr.txt",
                         "--space-cache", tmp_path / "spaces")
    assert_one_line_error(res, "--space-cache", "regular file")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    res = run_in_process(capsys, *common, "--source-corpus", corpora / "en.txt", "--target-corpus",
                         corpora / "fr.txt", "--space-cache", tmp_path / "file", "-o", tmp_path / "out.json")
    assert_one_line_error(res, "--space-cache", "is a file")
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(XltError, match="cannot write to the space cache directory"):  # below a file: the library's
        cached_space(str(tmp_path / "file" / "spaces"), a_key(), list)
    res = run_in_process(capsys, *common, "--source-corpus", corpora / "en.txt", "--target-corpus",
                         corpora / "fr.txt", "--n-sentences", 30, "--space-cache", tmp_path / "spaces",
                         "-o", tmp_path / "out.json")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out.json").read_text())["space_cache"]["target"]["hit"] is False
