"""`recsys tune`'s hook into a trial's fit: each validation round reported to Optuna, pruning.

The round is the step reported (rounds align trials; epochs do not when validation runs every
N steps), and the minutes a trial has run are recorded at each round and epoch end, so a killed
trial's time still counts against the budget (`training/workflows/tune_study.py`).
"""

from __future__ import annotations

from typing import Any

import optuna
from pytorch_lightning.callbacks import Callback

from training.loop.checkpoints import MONITOR
from training.workflows.tune_study import record_minutes_run


class PruneOnValidation(Callback):
    """Reports val NDCG@10 after each validation round; raises `optuna.TrialPruned` when told."""

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial
        self.rounds = 0  # the step reported: rounds align trials (epochs do not, every N steps)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """Report the round's score at step = its round; stop the fit if the pruner says so."""
        score = trainer.callback_metrics.get(MONITOR)
        if score is None or trainer.sanity_checking:
            return
        self.trial.report(float(score), step=self.rounds)
        record_minutes_run(self.trial)
        self.rounds += 1
        if self.trial.should_prune():
            raise optuna.TrialPruned(
                f"val ndcg@10 {float(score):.4f} at round {self.rounds - 1} "
                f"(epoch {trainer.current_epoch})"
            )

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Keep the minutes run (a kill between validation rounds counts them)."""
        record_minutes_run(self.trial)


class TrialCallbacks:
    """A `fit` start hook that only adds callbacks (no warm start)."""

    def __init__(self, *callbacks: Callback) -> None:
        self.callbacks = list(callbacks)

    def apply(self, module: Any) -> list[Callback]:
        """The callbacks, whatever the module."""
        return self.callbacks
