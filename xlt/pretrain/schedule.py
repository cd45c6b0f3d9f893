"""The inverse square root learning-rate schedule (Vaswani et al.; XLM's ``adam_inverse_sqrt``)."""

from __future__ import annotations

import torch


def inverse_sqrt_schedule(optimizer: torch.optim.Optimizer, lr: float, warmup_steps: int,
                          warmup_init_lr: float = 1e-7) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from ``warmup_init_lr`` to ``lr`` over ``warmup_steps``, then ``lr * sqrt(warmup / step)``.

    A LambdaLR multiplies the optimizer's base ``lr``, so the factor is expressed relative to it;
    its state (the step count) goes into checkpoints like any scheduler's.
    """

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (warmup_init_lr + (lr - warmup_init_lr) * step / warmup_steps) / lr
        return (max(warmup_steps, 1) / max(step, 1)) ** 0.5

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
