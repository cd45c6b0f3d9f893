"""One fine-tuning run's directory as files, read and tidied without its model or data; and the lock
under which the experiment's own files (OUTPUT/results.json, ...) are written.

The runner asks a :class:`RunFiles` whether a run is finished (``train.json``) before it loads
anything, so a command over a finished grid encodes no training data;
:class:`~xlt.finetune.trainer.RunTrainer` writes the files. What they hold keeps the keys, and the key
order, that every earlier version wrote: existing run directories are read as they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import math
import os
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from xlt.utils.outputs import remove_stale_temporaries
from xlt.utils.rundir import exclusive_lock
from xlt.utils.shapes import ListOf, MapOf, require_fields
from xlt.utils.textio import read_json


# What `xlt finetune` writes in OUTPUT itself (each through atomic_path), under OUTPUT/lock.
OUTPUT_FILES = ("results.json", "summary.md", "static_coverage.json")


@contextlib.contextmanager
def output_files_lock(output: str) -> Iterator[None]:
    """Held while OUTPUT's own files are written. Several processes can share a grid and all write
    them at the end: each waits for the others, and then a temporary of those files can only be a
    killed process's, removed here."""
    with exclusive_lock(os.path.join(output, "lock"), "output directory",
                        wait=f"{output}: waiting for another process writing its results"):
        remove_stale_temporaries(*(os.path.join(output, name) for name in OUTPUT_FILES))
        yield


@dataclass(frozen=True)
class TrainingSummary:
    """``train.json``, written once training is done (the fields' order is the file's)."""

    best_epoch: Optional[int]            # None only when no epoch scored (a NaN metric)
    best_file: Optional[str]             # best-epoch{E}.pt, the weights evaluation loads
    source_dev: Optional[dict[str, float]]   # the best epoch's metrics on the source dev set
    source_dev_main: float               # ... their main metric: what selection compares
    dev_curve: list[float]               # the main metric after each epoch
    epochs: int
    steps: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainingSummary":
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


METRICS = MapOf((float, None))   # a split's scores, as the task's evaluate gives them (NaN where undefined)
SUMMARY_FIELDS = {"best_epoch": (int, None), "best_file": (str, None), "source_dev": (METRICS, None),
                  "source_dev_main": float, "dev_curve": ListOf(float), "epochs": int, "steps": int}


@dataclass
class BestEpoch:
    """The best epoch so far on the source dev set; ``state.pt`` holds it as :meth:`to_dict`'s dict."""

    epoch: Optional[int] = None
    value: float = -math.inf
    file: Optional[str] = None
    metrics: Optional[dict[str, float]] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BestEpoch":
        return cls(data["epoch"], data["value"], data["file"], data["metrics"])


class RunFiles:
    """The files of one run (see :mod:`xlt.finetune.trainer` for the layout)."""

    def __init__(self, path: str):
        self.dir = os.fspath(path)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def training_summary(self) -> Optional[TrainingSummary]:
        """The contents of train.json, or None while training is not finished."""
        path = self.path("train.json")
        if not os.path.exists(path):
            return None
        return TrainingSummary.from_dict(require_fields(read_json(path), SUMMARY_FIELDS, path, "a fine-tuning summary"))

    def has_best_weights(self) -> bool:
        """Whether the best epoch can still be evaluated (training done and its weights kept)."""
        summary = self.training_summary()
        return summary is not None and os.path.exists(self.path(summary.best_file))

    def clean_leftovers(self) -> None:
        """Remove what a killed process left: temporary files, and a state a finished run no longer needs.

        Best-weight files that no state names are removed by the trainer once it knows the state.
        """
        for pattern in ("*.tmp", "eval/*.tmp", "predictions/*.tmp"):
            for tmp in glob.glob(self.path(pattern)):
                os.unlink(tmp)
        summary = self.training_summary()
        if summary is not None and os.path.exists(self.path("state.pt")):
            os.unlink(self.path("state.pt"))
            self.remove_best_except(summary.best_file)

    def remove_best_except(self, keep: Optional[str]) -> None:
        for stale in glob.glob(self.path("best-epoch*.pt")):
            if os.path.basename(stale) != keep:
                os.unlink(stale)
