"""`DecayBeforeStopping`: early stopping that, under `lr_schedule: plateau`, decays the lr first.

Early stopping with a constant lr ends a run at its plateau, where a decay of the lr would
still have gained (the cosine schedules' lead in docs/benchmarks/archive/recipe_study.md), and a
decay timed by the
budget (wsd, cosine) needs the budget known in advance and is cut off by early stopping. So,
when validation has not improved for `patience` rounds (counted on the mean of the last
`train.patience_window` rounds: `stopping.SmoothedStopping`) and the lr has not decayed yet, this
callback starts the module's decay (`TrainingClock.plateau`: a cosine over the next
`patience` rounds' steps, `optim.lr_factor`) and counts patience afresh instead of stopping.
The run then ends when that decay has ended, or sooner if early stopping says so.

A fit followed by a refit (`train.refit_epochs` > 0) stops at its plateau instead, as with a
constant lr: the refit ends the training, so it takes the decay (`DecayOverTheRefit`: the
same cosine, over the refit's steps). The refit then holds the whole decay: the fit runs at
the full lr even in its budget's last `decay_fraction` (`RetrievalModule.refit_owns_the_decay`).

It overrides `EarlyStopping`'s stopping decision (`_evaluate_stopping_criteria`, a private
method of Lightning 2.6; tests/training/test_optim.py and test_stopping.py fail if that
changes), so the checkpoint choice and the callback's saved state (its wait count, and the
recent rounds of its mean) stay Lightning's; the plateau itself is saved with the module's
`TrainingClock`.
"""

from __future__ import annotations

import logging
from typing import Any

from pytorch_lightning.callbacks import Callback
from pytorch_lightning.callbacks.early_stopping import EarlyStoppingReason
from torch import Tensor

from training.loop.stopping import SmoothedStopping

log = logging.getLogger("recsys.train")


class DecayBeforeStopping(SmoothedStopping):
    """Early stopping whose first plateau starts the lr decay; the run stops when it ends."""

    def __init__(self, rounds_every: int, steps_every: int | None = None, **kwargs: Any) -> None:
        """Epochs per validation round (`train.val_every`), or steps (`train.val_every_steps`)."""
        super().__init__(**kwargs)
        self.rounds_every = rounds_every
        self.steps_every = steps_every
        self._trainer: Any = None

    def _run_early_stopping_check(self, trainer: Any) -> None:
        self._trainer = trainer  # the decision below needs the clock and the rounds done
        super()._run_early_stopping_check(trainer)

    def _evaluate_stopping_criteria(self, current: Tensor) -> tuple[bool, str | None]:
        should_stop, reason = super()._evaluate_stopping_criteria(current)
        clock = self._trainer.lightning_module.clock
        if clock.plateau is None:
            if should_stop and self.stopping_reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
                clock.plateau = (clock.steps, self.patience * self._steps_per_round(clock.steps))
                self.wait_count = 0
                self.stopping_reason = EarlyStoppingReason.NOT_STOPPED
                message = (
                    f"{self._watched()} has not improved for {self.patience} rounds: the lr "
                    f"decays over the next {self.patience} rounds, then training stops"
                )
                log.info(message)
                return False, message
            return should_stop, reason
        start, steps = clock.plateau
        if clock.steps >= start + steps:
            self.stopping_reason = EarlyStoppingReason.PATIENCE_EXHAUSTED
            return True, "the lr decay after the validation plateau has ended"
        return should_stop, reason

    def _steps_per_round(self, steps: int) -> int:
        """Optimiser steps per validation round: N of rounds every N steps, else as counted."""
        if self.steps_every is not None:
            return self.steps_every
        rounds = max(1, (self._trainer.current_epoch + 1) // self.rounds_every)
        return max(1, round(steps / rounds))


class DecayOverTheRefit(Callback):
    """The refit's lr decay under `lr_schedule: plateau`: a cosine over all its steps."""

    def on_train_start(self, trainer: Any, module: Any) -> None:
        """Start the module's decay (`TrainingClock.plateau`) at the refit's first step."""
        module.clock.plateau = (module.clock.steps, max(1, int(trainer.estimated_stepping_batches)))
