"""The defaults are the tower study's `published-author-plateau` bar its lr decay, as trained."""

from __future__ import annotations

from pathlib import Path

from benchmarks.sweeps.final_grid import SAMPLED_DEFAULT, defaults
from benchmarks.sweeps.sweep_grid import BEAUTY
from benchmarks.sweeps.tower_grid import CHOSEN_TOWER, DEFAULT_SETTING, PLATEAU_SETTING
from benchmarks.sweeps.tower_settings import SETTINGS
from training.config_loading import build_run_config, load_config


def test_the_defaults_are_the_plateau_setting_without_its_lr_decay() -> None:
    studied = load_config(overrides=[f"model.tower={CHOSEN_TOWER}", *SETTINGS[DEFAULT_SETTING]])
    assert studied == load_config()
    decayed = load_config(overrides=[f"model.tower={CHOSEN_TOWER}", *SETTINGS[PLATEAU_SETTING]])
    assert decayed == load_config(overrides=["train.lr_schedule=plateau"])


def test_the_default_runs_on_the_test_split_train_the_defaults() -> None:
    specs, _ = defaults(Path("unused"))
    assert {(spec.sampler, spec.m) for spec in specs} == {SAMPLED_DEFAULT, ("full", None)}
    undo = ["train.threads=null", "train.max_minutes=null"]  # two at a time, 30 minutes
    default = load_config()
    for spec in (s for s in specs if s.dataset == BEAUTY):
        drawn = [] if spec.m is None else [f"sampler.num_negatives={spec.m}"]
        named = [f"sampler.name={spec.sampler}", *drawn]  # the grid's sampler and m
        trained = load_config(overrides=[*spec.sets, *undo, *named])
        assert trained == build_run_config(sampler=spec.sampler, num_negatives=spec.m)
        items = 12_101 if spec.m is None else default.sampler.full_up_to + 1
        assert default.for_catalogue(items) == trained  # what the default picks there
