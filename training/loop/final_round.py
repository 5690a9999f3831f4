"""The fit's last steps are always validated, so the best checkpoint can be the final model.

Lightning validates on its cadence only: every N epochs (`train.val_every`) or every N steps
(`train.val_every_steps`). A fit that ends off that cadence (the last epoch is not a multiple
of N, or the time cap stops it between rounds) would otherwise train its last steps for
nothing: they are never measured, so the best checkpoint cannot include them.
`FinalRound` runs after the time cap's `Timer` on each batch: on the fit's last batch it asks
for one more round. Lightning validates a batch that stops the fit, but only in an epoch on
its cadence: so FinalRound also puts rounds by epoch on every epoch for that last batch.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

import pytorch_lightning as pl_lightning
from pytorch_lightning.callbacks import Timer


class FinalRound(pl_lightning.Callback):
    """Turn the fit's last batch (time cap or last epoch) into a validation round."""

    def on_train_batch_end(  # noqa: D102
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        epochs = trainer.max_epochs  # None or -1: no epoch limit
        last_epoch = epochs is not None and 0 < epochs <= trainer.current_epoch + 1
        last_batch = batch_idx + 1 >= trainer.num_training_batches  # limit_train_batches too
        if not (trainer.should_stop or (last_epoch and last_batch)):
            return
        if trainer.check_val_every_n_epoch is not None:  # rounds by epoch: this epoch has one
            trainer.check_val_every_n_epoch = 1
        trainer.should_stop = True  # Lightning validates the batch that stops the fit


REFIT_SHARE = 1 / 3  # under a time cap a refit takes at most this share of it (>= 1 epoch)


class ReservingTimer(Timer):
    """Lightning's `Timer` for a cap that also covers a refit's epochs after the fit.

    After each epoch, at the mean pace of the epochs' training batches so far (a refit's
    epochs have no validation round): the refit gets `refit_epochs`, at most `reserve_epochs`
    and at most `REFIT_SHARE` of the cap but at least one, and the fit's own limit becomes the
    cap less their time. A fit the cap ends inside its first epoch leaves the refit one epoch.
    A resumed fit reserves again from its first epoch's end.
    """

    def __init__(self, minutes: float, reserve_epochs: int) -> None:
        super().__init__(duration=timedelta(minutes=minutes))
        self.cap = 60.0 * minutes
        self.reserve_epochs = reserve_epochs
        self.refit_epochs = min(reserve_epochs, 1)
        self.epoch_seconds: list[float] = []  # training batches only
        self._epoch_began = self._last_batch = 0.0

    def on_train_epoch_start(self, *args: Any) -> None:  # noqa: D102
        self._epoch_began = self._last_batch = time.monotonic()

    def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:  # noqa: D102
        self._last_batch = time.monotonic()
        super().on_train_batch_end(trainer, *args, **kwargs)

    def on_train_epoch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:  # noqa: D102
        self.epoch_seconds.append(self._last_batch - self._epoch_began)
        pace = max(statistics.fmean(self.epoch_seconds), 1e-9)
        fits = max(int(self.cap * REFIT_SHARE // pace), 1)
        self.refit_epochs = min(self.reserve_epochs, fits)
        self._duration = max(self.cap - self.refit_epochs * pace, 0.0)  # read on every batch
        super().on_train_epoch_end(trainer, *args, **kwargs)


def capped_final_round(
    max_minutes: float | None, reserve_epochs: int = 0
) -> list[pl_lightning.Callback]:
    """The time cap's timer (when there is a cap) followed by `FinalRound`, in that order.

    The order matters: `FinalRound` must see the `should_stop` the timer sets on the same
    batch, so the cap is a callback placed here rather than Lightning's `max_time`, which
    appends its timer after every callback given. `reserve_epochs`: epochs trained after the
    fit within the same cap (`training.workflows.refit`).
    """
    timer = [ReservingTimer(max_minutes, reserve_epochs)] if max_minutes else []
    return [*timer, FinalRound()]
