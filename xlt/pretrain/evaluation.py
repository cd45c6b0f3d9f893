"""Dev perplexity of a masked LM, read beside the unigram floor: what pretraining logs and selects on."""

from __future__ import annotations

import math
from typing import Callable, ContextManager, Iterable, Optional

import numpy as np
import torch

from xlt.data.masking import MaskedBatch


@torch.no_grad()
def masked_perplexity(model: torch.nn.Module, batches: Iterable[MaskedBatch], lang: str, device: torch.device,
                      autocast: Callable[[], ContextManager], log_p: Optional[np.ndarray] = None
                      ) -> tuple[float, Optional[float]]:
    """Perplexity of ``model`` (a :class:`~xlt.model.heads.MaskedLM`, in eval mode) on the targets of
    ``batches`` of language ``lang``, each batch weighted by its targets (NaN without any); with a
    unigram model's log-probabilities ``log_p`` [V], also that model's perplexity on the same targets,
    else None."""
    total, count, unigram_total = 0.0, 0, 0.0
    for masked in batches:
        n = masked.target_ids.numel()
        if n == 0:
            continue
        on_device = masked.to(device)
        with autocast():
            loss = model(on_device.input_ids, lang, None, on_device.flat_positions, on_device.target_ids)
        total, count = total + loss.float().item() * n, count + n
        if log_p is not None:
            unigram_total -= float(log_p[masked.target_ids.numpy()].sum())
    ppl = math.exp(total / count) if count else math.nan
    if log_p is None:
        return ppl, None
    return ppl, math.exp(unigram_total / count) if count else math.nan
