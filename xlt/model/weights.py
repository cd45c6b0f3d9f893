"""A checksum of a torch module's weights: what names the weights a fine-tuning run starts from, and
what a cache of a model's outputs is keyed by."""

from __future__ import annotations

import hashlib

import torch


def state_sha256(module) -> str:
    """sha256 of a torch module's state: each parameter and buffer's name, dtype, shape and bytes (the
    weights a fine-tuning run starts from, a cache of the model's outputs is keyed by)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())  # flat: a 0-d tensor has no byte view
    return digest.hexdigest()

