"""Checkpoints: everything needed to continue a run bit for bit, written atomically (read back by
:mod:`xlt.model.checkpoint_io`).

A checkpoint holds the model, optimizer, scheduler and gradient-scaler states, every random
generator, the language sampler and each language stream's position (per rank). It is written to
a temporary name and renamed, so a SIGKILL at any moment leaves either the previous checkpoint or
the new one, never a torn file.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import torch

from xlt.utils.errors import PathLike
from xlt.utils.outputs import atomic_path


class _KeptErrors:
    """A file that keeps the OS error of a failed write: torch.save reports one as a RuntimeError
    without it, and a full disk must read as a full disk (one error line), not as a bug."""

    def __init__(self, f: BinaryIO):
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def save_checkpoint(path: PathLike, state: dict[str, Any]) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        out = _KeptErrors(f)
        try:
            torch.save(state, out)
        except RuntimeError:
            if out.error is None:
                raise
            raise out.error from None
