"""Checkpoints: everything needed to continue a run bit for bit, written atomically.

A checkpoint holds the model, optimizer, scheduler and gradient-scaler states, every random
generator, the language sampler and each language stream's position (per rank). It is written to
a temporary name and renamed, so a SIGKILL at any moment leaves either the previous checkpoint or
the new one, never a torn file.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from xlt.utils.errors import PathLike, XltError
from xlt.utils.textio import atomic_path


def save_checkpoint(path: PathLike, state: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    try:
        # weights_only=False: the state holds numpy and Python RNG states, written by xlt itself.
        return torch.load(os.fspath(path), map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, OSError) as e:
        raise XltError(f"cannot read checkpoint ({e})", path) from None
