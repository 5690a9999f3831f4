"""When a recorded sweep run stands for today's settings (`benchmarks/sweeps/reuse.py`)."""

from __future__ import annotations

import pytest

from benchmarks import records
from benchmarks.sweeps import reuse, sweep
from tests.training.curves import NOISY_CLIMB, SPIKES
from training.config import RecsysConfig
from training.loop.stopping import stop_round

TODAY = reuse.training_settings(RecsysConfig())  # patience 10 on the mean of 3 rounds
PATIENT = {"patience": 20, "patience_window": 1}  # a rule that let NOISY_CLIMB run on


def _record(stopped_by: str | None, curve: list[float], **train: object) -> dict:
    """A result record trained with today's settings but `train`; 10 minutes of a 30-minute cap."""
    config = reuse.training_settings(RecsysConfig())
    config["train"].update({"max_minutes": 30.0, **train})
    rounds = [{"epoch": i, "val/ndcg@10": v} for i, v in enumerate(curve)]
    run = {"stopped_by": stopped_by, "validation": rounds, "train_seconds": 600.0,
           "epochs": len(curve)}  # fmt: skip
    return {"config": config, "metrics": run}


def _today(**train: object) -> dict:
    return {**TODAY, "train": {**TODAY["train"], "max_minutes": 30.0, **train}}


def test_the_curves_tell_the_rules_apart() -> None:
    assert stop_round(NOISY_CLIMB, 10, 1) == 13 and stop_round(NOISY_CLIMB, 10, 3) is None
    assert stop_round(SPIKES, 10, 1) is None and stop_round(SPIKES, 10, 3) == 15


def test_a_run_to_its_cap_is_reused_when_todays_stopping_rule_would_not_end_it() -> None:
    assert reuse.stops_alike(_record("time cap", NOISY_CLIMB, **PATIENT), _today())
    assert reuse.stops_alike(_record("max epochs", NOISY_CLIMB, **PATIENT), _today())
    # each round alone, as the committed runs from before the window (their records say so)
    assert reuse.stops_alike(_record("time cap", SPIKES[:12], patience_window=1), _today())


def test_a_run_today_or_its_own_rule_would_have_stopped_is_trained_again() -> None:
    # today's rule would have stopped it at round 15
    assert not reuse.stops_alike(_record("time cap", SPIKES, patience_window=1), _today())
    # its own rule (patience 10 alone) stops it at round 13, yet it reads "time cap"
    assert not reuse.stops_alike(_record("time cap", NOISY_CLIMB[:15], patience_window=1), _today())
    # its own rule stops it in its last round: the cap only if the cap was really reached
    last = _record("time cap", NOISY_CLIMB[:13], patience_window=1, patience=10)
    assert not reuse.stops_alike(last, _today(patience=12))
    capped = {**last, "metrics": {**last["metrics"], "train_seconds": 1800.5}}
    assert reuse.stops_alike(capped, _today(patience=12))


@pytest.mark.parametrize("stopped_by", ["early stopping", None])
def test_a_run_that_stopped_early_or_says_nothing_is_trained_again(stopped_by) -> None:
    assert not reuse.stops_alike(_record(stopped_by, NOISY_CLIMB, **PATIENT), _today())


def test_another_change_than_when_to_stop_is_trained_again() -> None:
    assert not reuse.stops_alike(_record("time cap", NOISY_CLIMB, **PATIENT, lr=0.01), _today())
    # under the plateau schedule the stopping keys also start the lr decay
    plateau = _record("time cap", NOISY_CLIMB, **PATIENT, lr_schedule="plateau")
    assert not reuse.stops_alike(plateau, _today(lr_schedule="plateau"))


@pytest.mark.parametrize("grid", ["final", "defaults"])
def test_every_committed_run_of_a_test_grid_stands_for_its_settings(grid: str) -> None:
    """`final` trains the recipe study's defaults (its runs from before the stopping window
    that ran to the cap are reused, the others were trained again with it); `defaults`
    trains today's, and its default run is committed."""
    from benchmarks.sweeps.grids import GRIDS, RESULT_DIRS

    specs, _ = GRIDS[grid](RESULT_DIRS[grid])
    settings = sweep.Sweep(RESULT_DIRS[grid])
    committed = [spec for spec in specs if settings.result_path(spec).is_file()]
    assert any(spec.sampler == "midx" for spec in committed)
    for spec in committed:
        record = records.read(settings.result_path(spec))
        current = reuse.training_settings(sweep.run_config(spec, settings))
        assert reuse.stands_for(record, current), spec.name
