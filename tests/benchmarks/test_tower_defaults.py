"""`configs/bsarec.yaml` is the tower study's chosen configuration, as the study trained it."""

from __future__ import annotations

from benchmarks.paths import REPO
from benchmarks.sweeps.tower_grid import CHOSEN_SETTING, CHOSEN_TOWER, SETTINGS
from training.config_loading import load_config


def test_the_preset_is_the_chosen_configuration() -> None:
    preset = load_config([REPO / "configs" / "bsarec.yaml"])
    studied = load_config(overrides=[f"model.tower={CHOSEN_TOWER}", *SETTINGS[CHOSEN_SETTING]])
    assert preset == studied
    assert preset != load_config()  # it changes something
