"""What the fine-tuning runner records of a run: the identity that names its directory, and its entry
in results.json with the evaluations it holds.

Both become JSON that existing run directories and results files depend on: ``to_dict`` gives the
keys, in the order, that earlier versions wrote, so a run's directory hash (:func:`short_hash` of its
identity) and its ``config.json`` stay what they were.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Optional

from xlt.finetune.config import RunSettings
from xlt.finetune.runfiles import TrainingSummary

RUN_FORMAT = "xlt-finetune-run/1"

Nested = dict[str, dict[str, dict[str, Any]]]        # variant ("plain", "map", "shift") -> lang -> split -> ...


def short_hash(obj: Any, n: int = 12) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]


@dataclass(frozen=True)
class RunIdentity:
    """Everything that decides a trained model: ``config.json``'s ``config``, and by its hash the run
    directory's name."""

    task: str
    task_settings: dict[str, Any]
    # The model kind's own record: checkpoint and vocabulary checksums of an xlt run, a transformers
    # model's name and checksums, a static file's (each kind names itself by other keys).
    model: dict[str, Any]
    source: str
    train_sha256: str
    dev_sha256: str
    labels: list[str]
    settings: RunSettings
    # "bf16" under autocast. fp32 (None) is left out of the dict, so the runs made before precision
    # was recorded keep their directories.
    precision: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        out = {"format": RUN_FORMAT, "task": self.task, "task_settings": self.task_settings, "model": self.model,
               "source": self.source, "train_sha256": self.train_sha256, "dev_sha256": self.dev_sha256,
               "labels": self.labels, "settings": self.settings.to_dict()}
        if self.precision is not None:
            out["precision"] = self.precision
        return out

    def short_hash(self) -> str:
        return short_hash(self.to_dict())


@dataclass
class RunEvaluations:
    """Every evaluation a command asks of one run, as its record in results.json holds them (computed
    and cached by :mod:`xlt.finetune.evaluations`)."""

    results: Nested        # ... -> the task's metrics
    shift_alpha: dict[str, float]   # target -> the shift weight its own dev set chose
    predictions: Optional[Nested]   # ... -> run-relative prediction file; None: none written (--no-predictions)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"results": self.results, "shift_alpha": self.shift_alpha}
        if self.predictions is not None:
            out["predictions"] = self.predictions
        return out


@dataclass
class RunRecord:
    """One run's entry in results.json (one grid point, one seed), the form selection reads.

    ``status`` is done (``training`` and ``evaluations`` set), busy (another process holds the run) or
    failed (``error``)."""

    id: str
    dir: str   # relative to the command's output directory
    settings: RunSettings
    status: str
    worked: bool = False   # done: whether this command trained or evaluated anything
    training: Optional[TrainingSummary] = None
    evaluations: Optional[RunEvaluations] = None
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "dir": self.dir, "grid_point": self.settings.grid_point(),
                               "seed": self.settings.seed, "settings": self.settings.to_dict(), "status": self.status}
        if self.status == "done":
            t = self.training
            assert t is not None and self.evaluations is not None
            out.update({"worked": self.worked, "best_epoch": t.best_epoch, "source_dev": t.source_dev_main,
                        "source_dev_metrics": t.source_dev, "dev_curve": t.dev_curve, **self.evaluations.to_dict()})
        elif self.status == "failed":
            out["error"] = self.error
        return out
