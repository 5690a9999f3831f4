"""One progress line per epoch on stderr (through logging), terminal or not; a bar on one.

`epoch 3/200: train loss 5.812, val ndcg@10 0.0331 recall@10 0.0590, 41.2 s, 1.1 min left of
the 2.5 min cap`. Epochs count from 1, up to `max_epochs`, as the user set them.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytorch_lightning as pl_lightning
from pytorch_lightning.callbacks import TQDMProgressBar

log = logging.getLogger("recsys.train")


class EpochProgress(pl_lightning.Callback):
    """Logs each finished epoch: mean train loss, val metrics, seconds, time left."""

    def __init__(self, max_epochs: int, max_minutes: float | None) -> None:
        self.max_epochs = max_epochs
        self.max_minutes = max_minutes
        self._fit_start = self._epoch_start = 0.0
        self._losses: list[float] = []
        self._validated = False

    def on_train_start(self, *args: Any) -> None:  # noqa: D102
        self._fit_start = time.perf_counter()

    def on_train_epoch_start(self, *args: Any) -> None:  # noqa: D102
        self._epoch_start = time.perf_counter()
        self._losses, self._validated = [], False

    def on_validation_epoch_end(self, *args: Any) -> None:  # noqa: D102
        self._validated = True

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:  # noqa: D102
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None:
            self._losses.append(float(loss))

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        """Runs after the epoch's validation round: its metrics are in `callback_metrics`."""
        if not trainer.is_global_zero:  # one line an epoch, whatever the number of ranks
            return
        now = time.perf_counter()
        metrics = trainer.callback_metrics
        parts = [f"epoch {trainer.current_epoch + 1}/{self.max_epochs}"]
        if self._losses:
            parts.append(f"train loss {sum(self._losses) / len(self._losses):.3f}")
        if self._validated and "val/ndcg@10" in metrics:
            parts.append(
                f"val ndcg@10 {float(metrics['val/ndcg@10']):.4f} "
                f"recall@10 {float(metrics.get('val/recall@10', float('nan'))):.4f}"
            )
        parts.append(f"{now - self._epoch_start:.1f} s")
        parts.append(self._time_left(now, trainer.current_epoch + 1))
        log.info(", ".join(parts))

    def _time_left(self, now: float, done: int) -> str:
        elapsed = now - self._fit_start
        if self.max_minutes:
            left = max(self.max_minutes - elapsed / 60, 0.0)
            return f"{left:.1f} min left of the {self.max_minutes:g} min cap"
        per_epoch = elapsed / done
        return f"at most {per_epoch * (self.max_epochs - done) / 60:.1f} min to go"


class EpochBar(TQDMProgressBar):
    """Lightning's progress bar (terminals only), epochs counted 1..max_epochs like the lines."""

    def on_train_epoch_start(self, trainer: Any, *args: Any) -> None:
        """Name the epoch first, then reset the bar (Lightning's own shows a 0-based name)."""
        bar = self.train_progress_bar
        bar.set_description(f"Epoch {trainer.current_epoch + 1}/{trainer.max_epochs}", False)
        total = self.total_train_batches
        bar.reset(total=total if math.isfinite(total) else None)
