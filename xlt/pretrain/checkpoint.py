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


def load_model_weights(model: torch.nn.Module, weights: dict[str, Any], path: PathLike) -> None:
    """``model.load_state_dict(weights)``, with a mismatch reported as one line naming the checkpoint
    (a run written by an xlt whose network had other parameters, or a file of another model)."""
    expected, found = set(model.state_dict()), set(weights)
    if expected != found:
        def some(names: set[str]) -> str:
            listed = sorted(names)
            return ", ".join(listed[:4]) + (f" and {len(listed) - 4} more" if len(listed) > 4 else "")
        parts = [f"missing {some(expected - found)}" if expected - found else "",
                 f"unexpected {some(found - expected)}" if found - expected else ""]
        raise XltError("the checkpoint's weights do not fit this network (" + "; ".join(p for p in parts if p)
                       + "); it was written by another version of xlt or for another model: pretrain it again", path)
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:  # same names, other shapes
        raise XltError(f"the checkpoint's weights do not fit this network ({str(e).splitlines()[-1].strip()})",
                       path) from None
