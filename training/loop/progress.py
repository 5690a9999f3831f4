"""One progress line per epoch on stderr (through logging), terminal or not; a bar on one.

`epoch 3/200: train loss 5.812, val ndcg@10 0.0331 recall@10 0.0590, 41.2 s, 1.1 min left of
the 2.5 min cap`. Epochs count from 1, up to `max_epochs`, as the user set them. With
validation every N steps (`train.val_every_steps`) each round adds a line of its own, `step
30: train loss ..., val ndcg@10 ..., 412.0 s, ...`, since an epoch may outlast the budget.
`EpochTimer` keeps the seconds of each epoch and of the fit (a resumed fit's include the run it
resumes). A resumed fit's lines count the seconds before the resume against the cap (the
module's `TrainingClock`, as the cap's timer does), and pace the rest by the epochs (steps) run
since it resumed.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

import pytorch_lightning as pl_lightning
from pytorch_lightning.callbacks import TQDMProgressBar

from training.loop.divergence import step_loss

log = logging.getLogger("recsys.train")


class EpochProgress(pl_lightning.Callback):
    """A line per epoch (and per round every N steps): loss, val metrics, seconds, time left."""

    def __init__(
        self,
        max_epochs: int,
        max_minutes: float | None,
        every_steps: int | None = None,
        label: str = "epoch",
    ) -> None:
        self.label = label  # what a line counts: "refit epoch 1/2" after the fit's epochs
        self.max_epochs = max_epochs
        self.max_minutes = max_minutes
        self.every_steps = every_steps
        self._fit_start = self._epoch_start = self._round_start = 0.0
        self._first_epoch = self._first_step = 0  # where this fit (or its resumed part) began
        self._losses: list[float] = []
        self._round_losses: list[float] = []
        self._validated = False

    def on_train_start(self, trainer: Any, module: Any) -> None:  # noqa: D102
        # a fit resumed part-way through an epoch has no epoch start: its epoch starts here
        self._fit_start = self._round_start = self._epoch_start = time.perf_counter()
        self._first_epoch, self._first_step = trainer.current_epoch, module.clock.steps

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
        left = trainer.estimated_stepping_batches - steps
        parts.append(self._time_left(module, now, steps - self._first_step, left))
        log.info(", ".join(parts))
        self._round_start, self._round_losses = now, []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        """Runs after the epoch's validation round: its metrics are in `callback_metrics`."""
        if not trainer.is_global_zero:  # one line an epoch, whatever the number of ranks
            return
        now = time.perf_counter()
        parts = [f"{self.label} {trainer.current_epoch + 1}/{self.max_epochs}"]
        parts += _loss_and_metrics(self._losses, trainer if self._validated else None)
        parts.append(f"{now - self._epoch_start:.1f} s")
        epochs = trainer.current_epoch + 1
        run = epochs - self._first_epoch
        parts.append(self._time_left(module, now, run, self.max_epochs - epochs))
        log.info(", ".join(parts))

    def _time_left(self, module: Any, now: float, run: float, left: float) -> str:
        """Time left of the cap; without one, the rest at this pace.

        Args:
            module: The module: its clock holds the fit's seconds, a resumed run's included.
            now: `time.perf_counter()`.
            run: Epochs (or steps) done since `on_train_start`.
            left: Epochs (or steps) still to go.

        """
        if self.max_minutes:
            rest = max(self.max_minutes - module.clock.seconds() / 60, 0.0)
            return f"{rest:.1f} min left of the {round(self.max_minutes, 3):g} min cap"
        pace = (now - self._fit_start) / max(run, 1)  # seconds an epoch (step) since the start
        return f"at most {pace * max(left, 0) / 60:.1f} min to go"


class EpochTimer(pl_lightning.Callback):
    """Wall seconds of each training epoch, its validation round included.

    Lightning runs an epoch's validation before `on_train_epoch_end`. Each validation round
    also logs `time/fit_seconds`, the wall time since the fit started (quality against time).
    The timings ride in the checkpoints (callback state): a resumed fit counts the epochs and
    seconds of the run it resumes too (an epoch it resumes part-way: from the resume).
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.resumed_seconds = 0.0  # fit seconds before a resume
        self._start = self._fit_start = 0.0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the fit's clock (and the epoch's: one resumed part-way has no epoch start)."""
        self._fit_start = self._start = time.perf_counter()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the clock."""
        self._start = time.perf_counter()

    def fit_seconds(self) -> float:
        """Wall seconds since the fit started, those before a resume included."""
        return self.resumed_seconds + time.perf_counter() - self._fit_start

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Log the wall time of this validation round's end since the fit started."""
        if not trainer.sanity_checking:
            pl_module.log("time/fit_seconds", self.fit_seconds())

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Stop the clock."""
        self.seconds.append(time.perf_counter() - self._start)

    def state_dict(self) -> dict[str, Any]:
        """The epochs' seconds so far and the fit's."""
        return {"epoch_seconds": list(self.seconds), "fit_seconds": self.fit_seconds()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the timings of the checkpoint's run."""
        self.seconds = [float(s) for s in state_dict.get("epoch_seconds", [])]
        self.resumed_seconds = float(state_dict.get("fit_seconds", 0.0))


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


def terminal_bar(label: str = "Epoch") -> list[Any]:
    """An `EpochBar` counting `label`s when stderr is a terminal; none in a log file (noise)."""
    return [EpochBar(label)] if sys.stderr.isatty() else []


class EpochBar(TQDMProgressBar):
    """Lightning's progress bar (terminals only), epochs counted 1..max_epochs like the lines.

    `label` names what the bar counts: `Epoch` for the fit, `Refit` for the refit's epochs.
    """

    def __init__(self, label: str = "Epoch") -> None:
        super().__init__()
        self.label = label

    def on_train_epoch_start(self, trainer: Any, *args: Any) -> None:
        """Name the epoch first, then reset the bar (Lightning's own shows a 0-based name)."""
        bar = self.train_progress_bar
        bar.set_description(f"{self.label} {trainer.current_epoch + 1}/{trainer.max_epochs}", False)
        total = self.total_train_batches
        bar.reset(total=total if math.isfinite(total) else None)
