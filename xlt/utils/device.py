"""The one reading of ``--device`` that every command shares."""

from __future__ import annotations

import torch

from xlt.utils.errors import XltError


def resolve_device(name: str | torch.device) -> torch.device:
    """auto: CUDA when present, else CPU; a CUDA device asked for on a machine without one is an error."""
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise XltError(f"unknown device {name!r}; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise XltError(f"--device {name}: no CUDA device on this machine")
    return device
