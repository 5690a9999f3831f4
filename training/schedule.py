"""The learning-rate schedule: a linear warm-up, then constant or a cosine over the budget.

The factor multiplies `train.lr` before every optimiser step. The cosine runs over the
training's progress (`RetrievalModule._progress`: the share of `max_epochs`' steps done, or of
`train.max_minutes` when that budget is reached sooner), from 1 down to `min_lr_ratio`. A run
capped by wall-clock time therefore ends its decay when its time ends, whatever its speed, and
a run without a time cap decays over `max_epochs` (early stopping may end it sooner).
"""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine")


def lr_factor(schedule: str, step: int, warmup_steps: int, progress: float, floor: float) -> float:
    """The multiplier of the base learning rate at an optimiser step.

    Args:
        schedule: "constant" or "cosine".
        step: Optimiser steps taken before this one (0 for the first).
        warmup_steps: Steps of the linear warm-up (0: none); step s uses (s + 1) / warmup.
        progress: Fraction of the training budget done, in [0, 1].
        floor: The cosine's final factor (`min_lr_ratio`).

    """
    warm = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    if schedule == "constant":
        return warm
    p = min(1.0, max(0.0, progress))
    return warm * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * p)))
