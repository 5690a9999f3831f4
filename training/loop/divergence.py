"""`StopOnDivergence`: a training whose loss turns NaN or infinite fails at once, saying why.

A diverged model's scores are NaN: nothing it ranks means anything, and every step after the
first NaN is wasted. So the fit raises `TrainingDivergedError` (exit 1) on the first
non-finite training loss, naming the step and the learning rate, instead of training on to
the cap and handing a broken model to checkpoint selection and publishing. The loss is read
once a step, as the progress line already reads it.
"""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl_lightning


def step_loss(outputs: Any) -> Any:
    """The training step's loss from what Lightning hands `on_train_batch_end` (None: none)."""
    return outputs["loss"] if isinstance(outputs, dict) else outputs


class TrainingDivergedError(RuntimeError):
    """The training loss became NaN or infinite."""


class StopOnDivergence(pl_lightning.Callback):
    """Raise `TrainingDivergedError` on the first non-finite training loss."""

    def on_train_batch_end(  # noqa: D102
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = step_loss(outputs)
        if loss is None or math.isfinite(float(loss)):
            return
        lr = module.cfg.train.lr
        raise TrainingDivergedError(
            f"training diverged: the loss is {float(loss)} at step {trainer.global_step} "
            f"(epoch {trainer.current_epoch + 1}); lower train.lr (now {lr:g}) and train again"
        )
