"""`TrainingClock`: where a training stands in its budget, kept across a resume.

The lr schedule and the samplers' annealing read the training's progress: optimiser steps
taken against the planned total, or wall seconds against `train.max_minutes`. The clock rides
in every checkpoint (`RetrievalModule.on_save_checkpoint`), so a run resumed from `last.ckpt`
continues its schedule, its time budget and its lr plateau where the killed run left them,
as Lightning's own time limit does, instead of starting them over (`training.annealing` maps
that progress to a temperature).
"""

from __future__ import annotations

import math
import time
from typing import Any


class TrainingClock:
    """Optimiser steps, fit seconds and the lr plateau of one training (`train.lr_schedule`)."""

    def __init__(self) -> None:
        self.steps = 0
        self.plateau: tuple[int, int] | None = None  # (the step it began at, its decay's steps)
        self.resumed_seconds = 0.0  # fit seconds before a resume
        self._started: float | None = None

    def start(self) -> None:
        """The fit (or its resumed part) begins now."""
        self._started = time.monotonic()

    def seconds(self) -> float:
        """Wall seconds of fitting so far, those before a resume included."""
        running = 0.0 if self._started is None else time.monotonic() - self._started
        return self.resumed_seconds + running

    def progress(self, total_steps: float, max_minutes: float | None) -> float:
        """Share of the budget done: steps of `total_steps`, or seconds of `max_minutes`.

        Whichever is further along; not clipped (a caller clips at 1).
        """
        done = self.steps / total_steps if 0 < total_steps < math.inf else 0.0
        if max_minutes is not None and self._started is not None:
            done = max(done, self.seconds() / (60.0 * max_minutes))
        return done

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: steps, plateau, fit seconds."""
        plateau = None if self.plateau is None else list(self.plateau)
        return {"steps": self.steps, "plateau": plateau, "seconds": self.seconds()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's `state_dict` (one from before the clock: from zero)."""
        self.steps = int(state.get("steps", 0))
        plateau = state.get("plateau")
        self.plateau = None if plateau is None else (int(plateau[0]), int(plateau[1]))
        self.resumed_seconds = float(state.get("seconds", 0.0))
