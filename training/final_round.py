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


def capped_final_round(max_minutes: float | None) -> list[pl_lightning.Callback]:
    """The time cap's `Timer` (when there is a cap) followed by `FinalRound`, in that order.

    The order matters: `FinalRound` must see the `should_stop` the timer sets on the same
    batch, so the cap is a callback placed here rather than Lightning's `max_time`, which
    appends its timer after every callback given.
    """
    timer = [Timer(duration=timedelta(minutes=max_minutes))] if max_minutes else []
    return [*timer, FinalRound()]
