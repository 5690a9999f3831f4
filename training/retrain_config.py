"""`recsys retrain`'s settings (the `retrain` section of the run configuration)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from model.config import Section


class RetrainConfig(Section):
    """`recsys retrain`: the warm start and the quality gate."""

    tolerance: float = Field(
        0.001,
        ge=0.0,
        description="The gate refuses a candidate only when its val NDCG@10 is below the served "
        "model's by more than this, at `retrain.confidence` (paired over the gate's rows).",
    )
    confidence: float = Field(
        0.95,
        gt=0.0,
        lt=1.0,
        description="The gate's confidence: the candidate is refused when the upper end of this "
        "two-sided interval for its mean per-row NDCG@10 difference to the served model is "
        "below -`retrain.tolerance` (training/workflows/gate_evidence.py).",
    )
    new_item_init: Literal["context", "random"] = Field(
        "context",
        description="New items' rows: the mean query vector of the histories that precede them "
        "in the training sequences, less the mean query (context), or random rows (random).",
    )
    patience: int = Field(
        1,
        ge=1,
        description="Early stopping of a warm retrain, in validation rounds (counted on the "
        "mean of the last `train.patience_window` rounds, as a training's); 1 stops at the "
        "first plateau and leaves the climb after it to the refit.",
    )
    max_epochs: int | None = Field(
        2,
        ge=1,
        description="The most epochs a warm retrain fits before its refit (`--max-epochs` "
        "overrides it; `--full` uses `train.max_epochs`); null: `train.max_epochs`.",
    )
    refit_epochs: int | None = Field(
        20,
        ge=0,
        description="The refit of a warm retrain, in epochs (as `train.refit_epochs`, which "
        "`--full` uses); null: `train.refit_epochs`.",
    )
    shrink: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Warm start: the served weights times this (shrink and perturb, Ash & "
        "Adams 2020); 1 keeps them as served.",
    )
    perturb: float = Field(
        0.0,
        ge=0.0,
        description="Warm start: plus this times the fresh model's initial weights; with a "
        "shrink or a perturbation the optimiser starts fresh.",
    )
