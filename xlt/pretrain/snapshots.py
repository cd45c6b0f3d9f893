"""Weight-only snapshots of a pretraining run: ``checkpoints/step-N.pt``, kept for good.

``--snapshot-every N`` and ``--snapshot-at STEP`` say after which optimizer steps the weights are
copied out, so that later stages can load the run as it was then (``--checkpoint step-N``). A
snapshot holds what :meth:`xlt.model.xlt_run.PretrainedRun.load` reads and the step, nothing
to resume from: no optimizer, scheduler or generator states.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from xlt.pretrain.checkpoint import save_checkpoint
from xlt.utils.checkpoint_names import snapshot_files, snapshot_name


def snapshot_due(step: int, every: int, at: Iterable[int]) -> bool:
    """Whether the weights after optimizer step ``step`` (1-based) are snapshotted."""
    return (every > 0 and step % every == 0) or step in at


def snapshot_path(checkpoints_dir: str, step: int) -> str:
    return os.path.join(checkpoints_dir, snapshot_name(step) + ".pt")


def write_snapshot(checkpoints_dir: str, step: int, weights: dict[str, Any]) -> bool:
    """Write ``step-N.pt`` unless it exists; True when written.

    A resumed run replays the steps after its last checkpoint bit for bit, so a snapshot the killed
    attempt wrote holds the same weights: it is left as it is (readers may have it open or cached).
    """
    path = snapshot_path(checkpoints_dir, step)
    if os.path.exists(path):
        return False
    save_checkpoint(path, {**weights, "step": step})
    return True


def remove_snapshots(checkpoints_dir: str) -> list[str]:
    """Delete the snapshots of an earlier attempt that a run starting over does not continue (it may
    have had other settings: its weights are not this run's); returns the paths removed."""
    removed = [path for _, path in snapshot_files(checkpoints_dir)]
    for path in removed:
        os.unlink(path)
    return removed
