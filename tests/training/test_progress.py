"""The progress lines of a resumed fit: its pace since the resume, the cap's whole fit time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from training.loop import progress
from training.loop.progress import EpochProgress


def _resumed_fit(monkeypatch: pytest.MonkeyPatch, callback: EpochProgress) -> list[str]:
    """A fit resumed at epoch 11 of 20 (step 40 of 80), 4 min in before the kill; 60 s on.

    Returns the lines `callback` logs for its first epoch (and round) after the resume.
    """
    now = [100.0]
    lines: list[str] = []
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(progress, "log", SimpleNamespace(info=lines.append))
    clock = SimpleNamespace(steps=40, seconds=lambda: 240.0 + now[0] - 100.0)
    module = SimpleNamespace(clock=clock)
    trainer = SimpleNamespace(
        current_epoch=10, is_global_zero=True, sanity_checking=False, callback_metrics={},
        estimated_stepping_batches=80,
    )  # fmt: skip
    callback.on_train_start(trainer, module)
    callback.on_train_epoch_start(trainer, module)
    now[0], clock.steps = 160.0, 45
    callback.on_validation_end(trainer, module)
    callback.on_train_epoch_end(trainer, module)
    return lines


def test_a_resumed_fit_paces_the_rest_by_the_epochs_and_steps_it_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    round_line, epoch_line = _resumed_fit(monkeypatch, EpochProgress(20, None, 5))
    assert round_line.startswith("step 45, ")
    assert round_line.endswith("at most 7.0 min to go")  # 5 steps in 60 s, 35 to go
    assert epoch_line.startswith("epoch 11/20, ") and "60.0 s" in epoch_line
    assert epoch_line.endswith("at most 9.0 min to go")  # 1 epoch in 60 s, 9 to go


def test_a_resumed_fit_counts_the_time_before_the_resume_against_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (epoch_line,) = _resumed_fit(monkeypatch, EpochProgress(20, 10.0))
    assert epoch_line.endswith("5.0 min left of the 10 min cap")  # 4 min before, 1 since


def test_a_cap_of_a_third_of_a_minute_reads_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    # `recsys tune` gives each trial its share of the budget: 5 minutes over 15 trials
    (epoch_line,) = _resumed_fit(monkeypatch, EpochProgress(20, 5 / 15))
    assert epoch_line.endswith("0.0 min left of the 0.333 min cap")  # not 0.333333


def test_a_day_long_cap_reads_in_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    (epoch_line,) = _resumed_fit(monkeypatch, EpochProgress(20, 1440.0))
    assert epoch_line.endswith("1435.0 min left of the 1440 min cap")  # not 1.44e+03
