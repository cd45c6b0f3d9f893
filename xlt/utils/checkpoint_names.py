"""Names of a run's checkpoints, as every command that takes a run accepts them (``--checkpoint``).

``best`` (lowest dev perplexity) and ``last`` are kept by pretraining for resuming; ``step-N`` is a
weight-only snapshot written at step N (``xlt pretrain --snapshot-every``), so a run's history can
be evaluated after the fact. For a transformers Trainer's output, ``step-N`` is its
``checkpoint-N/`` folder. Kept free of torch: option checks run before any heavy import.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from xlt.utils.errors import XltError

KEPT = ("best", "last")
_SNAPSHOT = re.compile(r"step-(0|[1-9][0-9]*)")
CHECKPOINT_HELP = "best (dev perplexity), last, or step-N (a snapshot: xlt pretrain --snapshot-every)"
FINETUNED_HELP = ("A run of xlt finetune started from --model (OUTPUT/runs/NAME, or OUTPUT: its selected setting's "
                  "first seed): its best epoch's encoder instead of the pretrained one (what fine-tuning did to "
                  "the representations).")


def snapshot_name(step: int) -> str:
    return f"step-{step}"


def snapshot_step(name: str) -> Optional[int]:
    """N for ``step-N``; None for any other name."""
    match = _SNAPSHOT.fullmatch(name)
    return int(match.group(1)) if match else None


def check_checkpoint_name(name: str, also: tuple[str, ...] = ()) -> str:
    """``name`` if it is best, last, step-N or one of ``also``; an XltError naming the choices otherwise."""
    if name in KEPT or name in also or snapshot_step(name) is not None:
        return name
    choices = ", ".join((*KEPT, *also, "step-N"))
    raise XltError(f"--checkpoint must be one of {choices} (N a step), got {name!r}")


def snapshot_files(checkpoints_dir: str) -> list[tuple[int, str]]:
    """(step, path) of every ``step-N.pt`` in a run's ``checkpoints/``, by step. Only whole files bear
    that name: a snapshot is written under a temporary name and renamed, so none listed is half-written."""
    found = []
    for name in os.listdir(checkpoints_dir) if os.path.isdir(checkpoints_dir) else ():
        step = snapshot_step(name[:-len(".pt")]) if name.endswith(".pt") else None
        if step is not None:
            found.append((step, os.path.join(checkpoints_dir, name)))
    return sorted(found)
