"""Reading what xlt pretrain wrote: a checkpoint file back into its dict of states, and its weights
into a network, each failure as one error line naming the file.

Writing (:func:`xlt.pretrain.checkpoint.save_checkpoint`) stays with pretraining; reading is here, in
the model layer, because every kind of consumer reads checkpoints: an xlt run loaded for the
analyses or fine-tuning (:class:`xlt.model.xlt_run.PretrainedRun`), pretraining resuming, tracking.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Mapping

import torch

from xlt.utils.errors import PathLike, XltError

# What torch.load raises on a file that is not a checkpoint: a git-lfs pointer, text or random bytes
# fail in the unpickler (UnpicklingError, or ValueError/OverflowError/TypeError/IndexError/KeyError on
# garbage opcodes), a pickle naming code that is not there fails on import, a torn zip in RuntimeError.
_UNREADABLE = (RuntimeError, EOFError, OSError, pickle.UnpicklingError, ValueError, OverflowError, TypeError,
               IndexError, KeyError, AttributeError, ImportError)
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def load_checkpoint(path: PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The dict saved by :func:`xlt.pretrain.checkpoint.save_checkpoint`; anything else (or an unreadable
    file) -> XltError."""
    try:
        # weights_only=False: the state holds numpy and Python RNG states, written by xlt itself.
        state = torch.load(os.fspath(path), map_location=map_location, weights_only=False)
    except _UNREADABLE as e:
        raise XltError(f"cannot read checkpoint ({_reason(path, e)})", path) from None
    if not isinstance(state, dict):
        raise XltError(f"cannot read checkpoint (it holds a {type(state).__name__}, not xlt's dict of states)", path)
    return state


def _reason(path: PathLike, error: Exception) -> str:
    try:
        with open(path, "rb") as f:
            if f.read(len(_LFS_POINTER)) == _LFS_POINTER:
                return "it is a git-lfs pointer, not the file: fetch it with git lfs pull"
    except OSError:
        pass
    return f"{type(error).__name__}: {error}"


def require_keys(state: dict[str, Any], expected: Mapping[str, type], path: PathLike) -> None:
    """Check that ``state`` has each key of ``expected`` with a value of its type: a file written by
    something other than xlt pretrain (or a damaged one) is one error line, not a KeyError later."""
    missing = [key for key in expected if key not in state]
    if missing:
        raise XltError(f"cannot read checkpoint (no {', '.join(missing)}: not a checkpoint written by xlt pretrain)",
                       path)
    for key, kind in expected.items():
        if not isinstance(state[key], kind):
            raise XltError(f"cannot read checkpoint ({key} is a {type(state[key]).__name__}, "
                           f"expected a {kind.__name__})", path)


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
