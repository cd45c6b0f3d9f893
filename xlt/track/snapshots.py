"""A run's snapshots, in step order, and the lock that gives each to one tracker at a time."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from typing import Iterator, Optional

from xlt.utils.checkpoint_names import snapshot_files, snapshot_name
from xlt.utils.outputs import make_directory


def list_snapshots(run: str) -> list[tuple[int, str]]:
    """(step, name) of every ``checkpoints/step-N.pt``, by step; of a transformers Trainer's output,
    every ``checkpoint-N/`` folder holding a model, named ``step-N`` (what ``--checkpoint`` takes).

    Only whole files carry that name (:func:`~xlt.utils.checkpoint_names.snapshot_files`), so one
    listed here is never read half-written.
    """
    from xlt.track.config import is_trainer_series

    if is_trainer_series(run):
        from xlt.model.spec import trainer_snapshots

        return [(step, snapshot_name(step)) for step in trainer_snapshots(run)]
    return [(step, snapshot_name(step)) for step, _ in snapshot_files(os.path.join(run, "checkpoints"))]


def run_slug(run: str) -> str:
    """A directory name of its own per run: its last two parts and a hash of its real path."""
    real = os.path.realpath(run)
    readable = re.sub(r"[^A-Za-z0-9_.+-]+", "_", "-".join(real.split(os.sep)[-2:]))
    return f"{readable}-{hashlib.sha256(real.encode()).hexdigest()[:10]}"


@contextlib.contextmanager
def snapshot_lock(track_dir: str, run: str, snapshot: str, wait: bool = False) -> Iterator[bool]:
    """Hold ``TRACKDIR/locks/<run>/<snapshot>.lock`` (flock LOCK_EX | LOCK_NB); yields False, holding
    nothing, when another process has it (``wait``: wait for it instead). The kernel drops the lock
    of a killed process, so a lock is never stale."""
    directory = make_directory(os.path.join(track_dir, "locks", run_slug(run)))
    fd = os.open(os.path.join(directory, f"{snapshot}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield True
    finally:
        os.close(fd)


def snapshot_label(step: Optional[int], name: str) -> str:
    return name if step is None else f"step {step:,}"
