"""The optimisers and the learning-rate schedule of a training.

`make_optimizers`: Adam on every parameter, or, with sparse item tables, Adam on the dense
parameters and SparseAdam on the tables. `schedule_lr`: a linear warm-up, then constant, a
cosine over the budget, constant and then that cosine over the budget's last part (wsd), or
wsd whose decay also starts when validation stops improving (plateau: the decay then lasts
`patience` validation rounds, `plateau.DecayBeforeStopping` starts it; with a refit after the
fit, the refit's steps instead, `plateau.DecayOverTheRefit`); its factor multiplies
`train.lr` before every optimiser step. The budget is the training's progress
(`RetrievalModule._progress`: the share of `max_epochs`' steps done, or of
`train.max_minutes` when that budget is reached sooner); the decay ends at `min_lr_ratio`. A
run capped by wall-clock time therefore ends its decay when its time ends, whatever its
speed, and a run without a time cap decays over `max_epochs` (early stopping may end it
sooner).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from model.towers import TwoTowerModel
from training.config import TrainConfig


def lr_factor(
    schedule: str,
    step: int,
    warmup_steps: int,
    progress: float,
    floor: float,
    tail: float = 0.2,
    plateau: tuple[int, int] | None = None,
) -> float:
    """The multiplier of the base learning rate at an optimiser step.

    Args:
        schedule: "constant"; "cosine" (decay over the whole budget); "wsd" (warm-up, stable,
            decay: constant, then a cosine over the budget's last `tail`); "plateau" (wsd,
            its decay started sooner by `plateau`, whichever decay is further along).
        step: Optimiser steps taken before this one (0 for the first).
        warmup_steps: Steps of the linear warm-up (0: none); step s uses (s + 1) / warmup.
        progress: Fraction of the training budget done, in [0, 1].
        floor: The decay's final factor (`min_lr_ratio`).
        tail: wsd: the share of the budget the decay takes (`decay_fraction`).
        plateau: plateau: (the step the decay began at: where validation stopped improving,
            or the refit's first; the decay's steps), or None before.

    """
    warm = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    if schedule == "constant":
        return warm
    p = min(1.0, max(0.0, progress))
    if schedule in ("wsd", "plateau"):
        p = max(0.0, p - (1.0 - tail)) / tail if tail > 0 else 0.0
    if schedule == "plateau" and plateau is not None:
        start, steps = plateau
        p = max(p, min(1.0, max(0.0, (step - start) / steps)))
    return warm * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * p)))


def schedule_lr(
    optimizers: list[Any],
    train: TrainConfig,
    step: int,
    progress: float,
    plateau: tuple[int, int] | None = None,
) -> float | None:
    """Set every optimiser's lr for this step; the lr set, or None (constant: untouched)."""
    if train.lr_schedule == "constant" and not train.warmup_steps:
        return None
    factor = lr_factor(
        train.lr_schedule, step, train.warmup_steps, progress, train.min_lr_ratio,
        train.decay_fraction, plateau,
    )  # fmt: skip
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = train.lr * factor
    return train.lr * factor


def make_optimizers(
    model: TwoTowerModel, extra: list[torch.nn.Parameter], train: TrainConfig
) -> list[torch.optim.Optimizer]:
    """Adam on everything, or Adam on the dense parameters + SparseAdam on the id tables.

    Args:
        model: The towers.
        extra: Parameters outside the towers (a learned temperature), with the dense ones.
        train: lr, weight decay (L2 or decoupled), sparse tables.

    """
    # fused: one kernel for the whole update; the per-tensor ops of the default Adam cost
    # ~25 ms a step on the d = 256 Beauty item table (CPU, one thread), fused ~2.5 ms.
    if not train.sparse_embeddings:
        return [_adam([*model.parameters(), *extra], train)]
    return [
        _adam([*model.dense_parameters(), *extra], train),
        torch.optim.SparseAdam(model.embedding_parameters(), lr=train.lr),
    ]


def _adam(params: list[torch.Tensor], train: TrainConfig) -> torch.optim.Adam:
    return torch.optim.Adam(
        params,
        lr=train.lr,
        weight_decay=train.weight_decay,
        decoupled_weight_decay=train.decoupled_weight_decay,
        fused=True,
    )
