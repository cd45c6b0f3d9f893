"""The fine-tuning runner's typed records write the JSON earlier versions wrote.

Existing run directories are found by the hash of their identity and read back from train.json, so
the dicts behind them are pinned here: keys, key order (config.json and results.json are written
unsorted) and the hash itself, computed from the dict literal earlier versions built.
"""

from __future__ import annotations

import json
import math

from xlt.finetune.config import RunSettings
from xlt.finetune.records import RunEvaluations, RunIdentity, RunRecord, short_hash
from xlt.finetune.runfiles import BestEpoch, RunFiles, TrainingSummary

SETTINGS = RunSettings(batch_size=8, encoder_lr=2e-5, head_lr=2e-5, seed=12, epochs=10, epoch_size=None,
                       schedule="linear", warmup_fraction=0.1, max_len=128, dropout=None, freeze_bottom=0,
                       clip_norm=5.0, bucket=True)
MODEL = {"checkpoint": "best", "vocab_sha256": "a" * 64, "checkpoint_sha256": "b" * 64}
LEGACY_IDENTITY = {"format": "xlt-finetune-run/1", "task": "ner", "task_settings": {"f1": "conlleval"},
                   "model": MODEL, "source": "en", "train_sha256": "c" * 64, "dev_sha256": "d" * 64,
                   "labels": ["B-PER", "I-PER", "O"], "settings": SETTINGS.to_dict()}


def identity(precision=None) -> RunIdentity:
    return RunIdentity("ner", {"f1": "conlleval"}, MODEL, "en", "c" * 64, "d" * 64, ["B-PER", "I-PER", "O"],
                       SETTINGS, precision)


def test_run_identity_is_the_legacy_dict_and_hash():
    assert list(identity().to_dict().items()) == list(LEGACY_IDENTITY.items())
    # Hashes of the pre-dataclass runner: a changed value here renames every existing run directory.
    assert identity().short_hash() == short_hash(LEGACY_IDENTITY) == "2020b012334a"
    assert identity("bf16").to_dict() == {**LEGACY_IDENTITY, "precision": "bf16"}
    assert identity("bf16").short_hash() == "971107580efd"


def test_training_summary_round_trips_train_json_in_its_key_order(tmp_path):
    text = json.dumps({"best_epoch": 2, "best_file": "best-epoch2.pt", "source_dev": {"f1": 80.0},
                       "source_dev_main": 80.0, "dev_curve": [70.0, 80.0], "epochs": 2, "steps": 20}, indent=2)
    (tmp_path / "train.json").write_text(text + "\n")
    summary = RunFiles(str(tmp_path)).training_summary()
    assert summary == TrainingSummary(2, "best-epoch2.pt", {"f1": 80.0}, 80.0, [70.0, 80.0], 2, 20)
    assert json.dumps(summary.to_dict(), indent=2) == text
    assert RunFiles(str(tmp_path / "none")).training_summary() is None


def test_best_epoch_is_state_pt_s_dict():
    assert BestEpoch().to_dict() == {"epoch": None, "value": -math.inf, "file": None, "metrics": None}
    best = {"epoch": 3, "value": 1.5, "file": "best-epoch3.pt", "metrics": {"accuracy": 1.5}}
    assert BestEpoch.from_dict(best).to_dict() == best


def test_run_records_keep_results_json_s_keys_and_order():
    base = {"id": "bs8-x", "dir": "runs/bs8-x", "grid_point": SETTINGS.grid_point(), "seed": 12,
            "settings": SETTINGS.to_dict()}
    assert list(RunRecord("bs8-x", "runs/bs8-x", SETTINGS, "busy").to_dict().items()) == \
        list({**base, "status": "busy"}.items())
    failed = RunRecord("bs8-x", "runs/bs8-x", SETTINGS, "failed", error="RuntimeError: no")
    assert list(failed.to_dict().items()) == list({**base, "status": "failed", "error": "RuntimeError: no"}.items())
    summary = TrainingSummary(1, "best-epoch1.pt", {"f1": 50.0}, 50.0, [50.0], 1, 4)
    results = {"plain": {"en": {"dev": {"f1": 50.0}}}}
    for predictions in (None, {}, {"plain": {"en": {"dev": "predictions/dev.en.ner"}}}):
        done = RunRecord("bs8-x", "runs/bs8-x", SETTINGS, "done", worked=True, training=summary,
                         evaluations=RunEvaluations(results, {}, predictions))
        expected = {**base, "status": "done", "worked": True, "best_epoch": 1, "source_dev": 50.0,
                    "source_dev_metrics": {"f1": 50.0}, "dev_curve": [50.0], "results": results, "shift_alpha": {},
                    **({} if predictions is None else {"predictions": predictions})}
        assert list(done.to_dict().items()) == list(expected.items())
