"""One progress line per epoch on stderr (through logging), terminal or not; a bar on one.

`epoch 3/200: train loss 5.812, val ndcg@10 0.0331 recall@10 0.0590, 41.2 s, 1.1 min left of
the 2.5 min cap`. Epochs count from 1, up to `max_epochs`, as the user set them. With
validation every N steps (`train.val_every_steps`) each round adds a line of its own, `step
30: train loss ..., val ndcg@10 ..., 412.0 s, ...`, since an epoch may outlast the budget.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytorch_lightning as pl_lightning
from pytorch_lightning.callbacks import TQDMProgressBar

from training.divergence import step_loss

log = logging.getLogger("recsys.train")


class EpochProgress(pl_lightning.Callback):
    """A line per epoch (and per round every N steps): loss, val metrics, seconds, time left."""

    def __init__(
        self, max_epochs: int, max_minutes: float | None, every_steps: int | None = None
    ) -> None:
        self.max_epochs = max_epochs
        self.max_minutes = max_minutes
        self.every_steps = every_steps
        self._fit_start = self._epoch_start = self._round_start = 0.0
        self._losses: list[float] = []
        self._round_losses: list[float] = []
        self._validated = False

    def on_train_start(self, *args: Any) -> None:  # noqa: D102
        self._fit_start = self._round_start = time.perf_counter()

    def on_train_epoch_start(self, *args: Any) -> None:  # noqa: D102
        self._epoch_start = time.perf_counter()
        self._losses, self._validated = [], False

    def on_validation_epoch_end(self, *args: Any) -> None:  # noqa: D102
        self._validated = True

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:  # noqa: D102
        loss = step_loss(outputs)
        if loss is not None:
            self._losses.append(float(loss))
            if self.every_steps is not None:
                self._round_losses.append(self._losses[-1])

    def on_validation_end(self, trainer: Any, module: Any) -> None:
        """A line per round when rounds come every N steps (the metrics are logged by now)."""
        if self.every_steps is None or trainer.sanity_checking or not trainer.is_global_zero:
            return
        now, steps = time.perf_counter(), module.clock.steps  # one a batch, resumed with the fit
        parts = [f"step {steps}", *_loss_and_metrics(self._round_losses, trainer)]
        parts.append(f"{now - self._round_start:.1f} s")
        parts.append(self._time_left(now, steps / trainer.estimated_stepping_batches))
        log.info(", ".join(parts))
        self._round_start, self._round_losses = now, []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        """Runs after the epoch's validation round: its metrics are in `callback_metrics`."""
        if not trainer.is_global_zero:  # one line an epoch, whatever the number of ranks
            return
        now = time.perf_counter()
        parts = [f"epoch {trainer.current_epoch + 1}/{self.max_epochs}"]
        parts += _loss_and_metrics(self._losses, trainer if self._validated else None)
        parts.append(f"{now - self._epoch_start:.1f} s")
        parts.append(self._time_left(now, (trainer.current_epoch + 1) / self.max_epochs))
        log.info(", ".join(parts))

    def _time_left(self, now: float, done: float) -> str:
        """Time left of the cap; without one, the rest at this pace (`done`: the share done)."""
        elapsed = now - self._fit_start
        if self.max_minutes:
            left = max(self.max_minutes - elapsed / 60, 0.0)
            return f"{left:.1f} min left of the {self.max_minutes:g} min cap"
        return f"at most {elapsed * (1 - done) / done / 60:.1f} min to go"


def _loss_and_metrics(losses: list[float], trainer: Any | None) -> list[str]:
    """`train loss x` (mean of `losses`) and the last round's val metrics (None: no round)."""
    parts = [f"train loss {sum(losses) / len(losses):.3f}"] if losses else []
    metrics = {} if trainer is None else trainer.callback_metrics
    if "val/ndcg@10" in metrics:
        parts.append(
            f"val ndcg@10 {float(metrics['val/ndcg@10']):.4f} "
            f"recall@10 {float(metrics.get('val/recall@10', float('nan'))):.4f}"
        )
    return parts


class EpochBar(TQDMProgressBar):
    """Lightning's progress bar (terminals only), epochs counted 1..max_epochs like the lines."""

    def on_train_epoch_start(self, trainer: Any, *args: Any) -> None:
        """Name the epoch first, then reset the bar (Lightning's own shows a 0-based name)."""
        bar = self.train_progress_bar
        bar.set_description(f"Epoch {trainer.current_epoch + 1}/{trainer.max_epochs}", False)
        total = self.total_train_batches
        bar.reset(total=total if math.isfinite(total) else None)
