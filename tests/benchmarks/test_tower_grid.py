"""The query-tower study's plan: which runs it makes, and with which settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sweeps import tower_grid
from benchmarks.sweeps.sweep_grid import BEAUTY, TOYS


def _names(dataset: str) -> set[str]:
    specs, _ = tower_grid.towers(Path("unused"))
    return {spec.label for spec in specs if spec.dataset == dataset}


def test_every_setting_sets_each_key_once() -> None:
    for setting, keys in tower_grid.SETTINGS.items():
        names = [key.split("=", 1)[0] for key in keys]
        assert len(names) == len(set(names)), setting


def test_a_beauty_first_run_reaches_amazon_toys_only_once_it_led(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = tower_grid.BEAUTY_FIRST[0]
    labels = {f"{tower}-{setting}" for tower, setting in tower_grid.BEAUTY_FIRST}
    monkeypatch.setattr(tower_grid, "LED_ON_BEAUTY", ())
    monkeypatch.setattr(tower_grid, "BOTH_AT_ONCE", ())
    assert labels <= _names(BEAUTY)
    assert not labels & _names(TOYS)
    tower, setting = first
    assert tower not in tower_grid.planned(TOYS, setting)

    monkeypatch.setattr(tower_grid, "LED_ON_BEAUTY", (first,))
    assert f"{tower}-{setting}" in _names(TOYS)
    assert tower in tower_grid.planned(TOYS, setting)
    monkeypatch.setattr(tower_grid, "LED_ON_BEAUTY", ())
    monkeypatch.setattr(tower_grid, "BOTH_AT_ONCE", (first,))  # run beside its beauty run
    assert f"{tower}-{setting}" in _names(TOYS)


def test_a_later_candidate_changes_only_what_it_names() -> None:
    chosen = tower_grid.SETTINGS["published-author-plateau-lr1e-3"]
    wider = tower_grid.SETTINGS["published-author-plateau-lr1e-3-d128"]
    assert set(chosen) - set(wider) == {"model.dim=64"}
    assert set(wider) - set(chosen) == {"model.dim=128"}
