"""``xlt track`` on a transformers Trainer's output: its ``checkpoint-N/`` folders are snapshots step-N,
tracked like an xlt run's (records, bounds from the config freshly initialised, idempotence), with dev
perplexity skipped and said why once. A tiny random BERT (tests/hf_fixtures.py), offline."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network

import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import synthetic  # noqa: E402
import torch  # noqa: E402
from conftest import run_in_process  # noqa: E402
from hf_fixtures import _bert  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LAYERS = [0, 1, 2, 3]  # hf_fixtures' BERT: embeddings and 3 layers
DEV_PPL_SKIPPED = "dev_ppl: skipped (a transformers Trainer's output"


def add_checkpoint(root: Path, step: int, shift: float) -> None:
    """checkpoint-<step>/: the first folder's model with its word embeddings moved by ``shift``."""
    from transformers import BertForMaskedLM

    shutil.copytree(root / "checkpoint-1000", root / f"checkpoint-{step}")
    later = BertForMaskedLM.from_pretrained(root / f"checkpoint-{step}")
    with torch.no_grad():
        later.bert.embeddings.word_embeddings.weight.add_(shift)
    later.save_pretrained(root / f"checkpoint-{step}")


@pytest.fixture()
def series(tmp_path) -> Path:
    root = tmp_path / "trainer-out"
    root.mkdir()
    _bert(root / "checkpoint-1000")
    add_checkpoint(root, 2000, 0.5)
    (root / "runs").mkdir()   # the Trainer's logs: no snapshot
    return root


def records(track_dir: Path) -> list[dict]:
    path = track_dir / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def track(capsys, series: Path, parallel: tuple[Path, Path], out: Path, *extra):
    return run_in_process(capsys, "track", "--run", series, "--parallel", *parallel, "--source-lang", "en",
                          "--target-lang", "fr", "--max-sentences", "20", "-o", out, "--device", "cpu", *extra)


def test_a_trainer_series_is_tracked_step_by_step(series, tmp_path, capsys):
    from xlt.analysis.cka import per_layer_cka
    from xlt.analysis.extract import sentence_vectors
    from xlt.loader.text_model import load_text_model

    parallel = synthetic.write_corpus(tmp_path, n=20, seed=5)
    out = tmp_path / "track"
    res = track(capsys, series, parallel, out)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count(DEV_PPL_SKIPPED) == 1
    rows = records(out)
    found = {(r["snapshot"], r["step"], r["measure"], r["lang"], r["layer"]) for r in rows}
    expected = {(snap, step, m, "fr", layer) for snap, step in (("random", None), ("step-1000", 1000),
                                                                  ("step-2000", 2000))
                for m in ("cka", "lang_id") for layer in LAYERS}
    assert found == expected and len(rows) == len(expected)
    assert not any(r["measure"] == "dev_ppl" for r in rows)

    # Against the analyses themselves: CKA of step-2000 is checkpoint-2000/'s, its bound the random encoder's.
    en, fr = (p.read_text().splitlines() for p in parallel)
    model = load_text_model(str(series), "step-2000")
    want = per_layer_cka(sentence_vectors(model, "en", en), sentence_vectors(model, "fr", fr))
    by_key = {(r["snapshot"], r["measure"], r["layer"]): r for r in rows}
    got = [by_key["step-2000", "cka", layer]["value"] for layer in LAYERS]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for layer in LAYERS:
        random = by_key["random", "cka", layer]["value"]
        assert by_key["step-1000", "cka", layer]["bound"] == by_key["step-2000", "cka", layer]["bound"] == random
    # The two folders hold other weights, so other values (the records are not one snapshot's twice).
    assert by_key["step-1000", "lang_id", 0]["value"] != by_key["step-2000", "lang_id", 0]["value"]

    # Idempotent: nothing new, nothing appended, no model loaded.
    assert track(capsys, series, parallel, out).returncode == 0
    assert len(records(out)) == len(rows)

    # A new checkpoint-N folder adds exactly its records.
    add_checkpoint(series, 3000, -0.5)
    assert track(capsys, series, parallel, out).returncode == 0
    added = records(out)[len(rows):]
    assert {(r["snapshot"], r["measure"], r["layer"]) for r in added} == {
        ("step-3000", m, layer) for m in ("cka", "lang_id") for layer in LAYERS}
    assert len(added) == 2 * len(LAYERS)


def test_a_series_without_languages_needs_the_target_language(series, tmp_path, capsys):
    parallel = synthetic.write_corpus(tmp_path, n=10, seed=5)
    res = run_in_process(capsys, "track", "--run", series, "--parallel", *parallel, "-o", tmp_path / "t",
                         "--device", "cpu")
    assert res.returncode == 2
    assert "--target-lang" in res.stderr and "Traceback" not in res.stderr


def test_ner_fine_tunes_each_folder_and_the_freshly_initialised_config(series, tmp_path, capsys):
    from finetune_hf_data import write_ner

    parallel = synthetic.write_corpus(tmp_path, n=10, seed=5)
    ner = tmp_path / "tasks"
    for lang in ("en", "fr"):
        (ner / "ner" / "wikiann" / lang).mkdir(parents=True)
        for split, n, seed in (("train", 16, 1), ("dev", 8, 2), ("test", 8, 3)):
            write_ner(ner / "ner" / "wikiann" / lang / split, lang, n, seed)
    out = tmp_path / "track"
    res = track(capsys, series, parallel, out, "--measures", "ner_f1", "--measures", "dev_ppl", "--ner-data-dir",
                ner, "--ner-epochs", "1", "--ner-batch-size", "8", "--ner-train-sentences", "16", "--ner-max-len", "64")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count(DEV_PPL_SKIPPED) == 1
    rows = records(out)
    assert {(r["snapshot"], r["measure"], r["lang"]) for r in rows} == {
        (snap, "ner_f1", lang) for snap in ("random", "step-1000", "step-2000") for lang in ("en", "fr")}
    assert all(0.0 <= r["value"] <= 100.0 for r in rows)  # F1 in percent, as xlt finetune reports it
    assert all(r["bound"] is not None for r in rows if r["snapshot"] != "random")


def test_a_folder_the_trainer_is_still_writing_is_left_for_the_next_call(series, tmp_path, capsys):
    parallel = synthetic.write_corpus(tmp_path, n=10, seed=5)
    out = tmp_path / "track"
    (series / "checkpoint-3000").mkdir()
    shutil.copy(series / "checkpoint-1000" / "config.json", series / "checkpoint-3000")   # no weights yet
    res = track(capsys, series, parallel, out, "--measures", "cka")
    assert res.returncode == 0, res.stderr
    assert "step 3,000: later (its checkpoint folder cannot be loaded yet" in res.stderr
    assert {r["snapshot"] for r in records(out)} == {"random", "step-1000", "step-2000"}
    shutil.rmtree(series / "checkpoint-3000")
    add_checkpoint(series, 3000, -0.5)   # now whole
    assert track(capsys, series, parallel, out, "--measures", "cka").returncode == 0
    assert {r["snapshot"] for r in records(out)} == {"random", "step-1000", "step-2000", "step-3000"}


def test_a_series_whose_config_names_its_languages_refuses_another_before_the_tracking_directory(tmp_path, capsys):
    from transformers import XLMConfig, XLMWithLMHeadModel

    root = tmp_path / "xlm-out"
    config = XLMConfig(vocab_size=30, emb_dim=16, n_layers=1, n_heads=2, use_lang_emb=True, n_langs=2,
                       lang2id={"en": 0, "fr": 1}, id2lang={0: "en", 1: "fr"})
    XLMWithLMHeadModel(config).save_pretrained(root / "checkpoint-1000")
    parallel = synthetic.write_corpus(tmp_path, n=10, seed=5)
    out = tmp_path / "t"
    res = run_in_process(capsys, "track", "--run", root, "--parallel", *parallel, "--source-lang", "en",
                         "--target-lang", "de", "-o", out, "--device", "cpu")
    assert res.returncode == 2 and "--target-lang 'de' is not one of the run's languages (en, fr)" in res.stderr
    assert not out.exists()   # nothing recorded: the right call after it is not refused
