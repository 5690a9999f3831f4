"""Early stopping on a smoothed validation curve (`train.patience_window`).

Lightning's early stopping restarts its patience whenever one round beats the best so far,
and ends the run when `patience` rounds have not. On the slow, noisy plateau of a sampled
run that decision is a coin toss: one round above or below the best by a ten-thousandth of
val NDCG@10 decided between 31 and 80 epochs, and between test NDCG@10 0.044 and 0.048, for
two runs of the same model (docs/benchmarks/archive/benchmarks.md, the final grid).
`SmoothedStopping` counts
patience on the mean of the last `window` rounds instead, so a single round can neither
restart nor end the count; the checkpoint is still the best single round
(`ModelCheckpoint`). `window = 1` is Lightning's rule.

`stop_round` is the same rule on a recorded curve (`benchmarks/studies/stopping_rules.py` replays it
on every committed run; the sweeps use it to tell whether a run ended at its cap would have
ended sooner under today's rule). A test keeps the two equal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.callbacks.early_stopping import EarlyStoppingReason

log = logging.getLogger("recsys.train")


def smoothed(curve: Sequence[float], window: int) -> list[float]:
    """The mean of each round's last `window` rounds (fewer at the start)."""
    return [
        sum(curve[max(0, i - window + 1) : i + 1]) / min(i + 1, window) for i in range(len(curve))
    ]


def stop_round(curve: Sequence[float], patience: int, window: int = 1) -> int | None:
    """The rounds early stopping trains on a higher-is-better `curve`; None: it never stops."""
    best, since = float("-inf"), 0
    for i, score in enumerate(smoothed(curve, window)):
        if score > best:
            best, since = score, 0
            continue
        since += 1
        if since >= patience:
            return i + 1
    return None


class SmoothedStopping(EarlyStopping):
    """Lightning's early stopping, its patience counted on the last `window` rounds' mean."""

    def __init__(self, *, window: int = 1, **kwargs: Any) -> None:
        """`window` rounds averaged (1: each round alone); the rest is `EarlyStopping`'s."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        super().__init__(**kwargs)
        self.window = window
        self.recent: list[float] = []

    @property
    def state_key(self) -> str:
        """The key of the callback's state in a checkpoint.

        Lightning's own for the plain rule, so that a checkpoint saved by `EarlyStopping`
        (before the window) resumes its count; a subclass keeps its own name.
        """
        name = "EarlyStopping" if type(self) is SmoothedStopping else type(self).__qualname__
        key = {"monitor": self.monitor, "mode": self.mode}  # Lightning's `_generate_state_key`
        return f"{name}{key!r}"

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        self.recent = [*self.recent, float(current)][-self.window :]
        # float64 on the CPU, as `stop_round` compares: a window of 1 passes the value as is
        mean = torch.tensor(sum(self.recent) / len(self.recent), dtype=torch.float64)
        should_stop, reason = super()._evaluate_stopping_criteria(mean)
        if should_stop and self.stopping_reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
            best = float(self.best_score)
            reason = (
                f"{self._watched()} has not improved for {self.patience} rounds (best {best:.4f})"
            )
        return should_stop, reason

    def _run_early_stopping_check(self, trainer: Any) -> None:
        """Lightning's check, and the reason in the log when this round stops the fit."""
        going = self.stopping_reason == EarlyStoppingReason.NOT_STOPPED
        super()._run_early_stopping_check(trainer)
        stopped = self.stopping_reason != EarlyStoppingReason.NOT_STOPPED
        if going and stopped and trainer.is_global_zero:
            log.info("early stopping: %s", self.stopping_reason_message)

    def _watched(self) -> str:
        """What the patience is counted on, for messages."""
        if self.window == 1:
            return self.monitor
        return f"the mean {self.monitor} of the last {self.window} rounds"

    def state_dict(self) -> dict[str, Any]:
        """Lightning's state and the rounds the mean needs, so a resumed fit counts on."""
        return {**super().state_dict(), "recent": list(self.recent)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore; a checkpoint from before the window counts afresh on the mean.

        Its best is a single round's, which a mean seldom beats: kept, it would stop the
        resumed fit `patience` rounds later whatever the curve does.
        """
        super().load_state_dict(state_dict)
        self.recent = list(state_dict.get("recent", []))
        if "recent" not in state_dict and self.window > 1:
            self.best_score = torch.tensor(-torch.inf if self.mode == "max" else torch.inf)
            self.wait_count = 0
            log.info("resumed from a checkpoint saved before train.patience_window: "
                     "early stopping counts afresh on the mean of the last rounds")  # fmt: skip
