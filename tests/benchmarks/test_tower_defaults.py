"""The defaults are the tower study's chosen configuration as `recsys train` ships it."""

from __future__ import annotations

from pathlib import Path

from benchmarks.sweeps.final_grid import SAMPLED_DEFAULT, defaults
from benchmarks.sweeps.sweep_grid import BEAUTY
from benchmarks.sweeps.tower_grid import CHOSEN_SETTING, CHOSEN_TOWER, as_shipped, candidate_spec
from benchmarks.sweeps.tower_settings import SETTINGS
from training.config_loading import build_run_config, load_config


def test_the_defaults_are_the_chosen_configuration_with_a_held_lr_and_auto_precision() -> None:
    assert load_config(overrides=list(as_shipped(CHOSEN_SETTING))) == load_config()
    studied = load_config(overrides=[f"model.tower={CHOSEN_TOWER}", *SETTINGS[CHOSEN_SETTING]])
    assert studied == load_config(overrides=["train.lr_schedule=plateau", "train.precision=bf16"])


def test_the_candidate_run_trains_the_defaults_as_the_default_runs_do() -> None:
    specs, _ = defaults(Path("unused"))
    full = next(s for s in specs if s.dataset == BEAUTY and s.sampler == "full")
    candidate = candidate_spec(BEAUTY)
    assert (candidate.sampler, candidate.m) == (full.sampler, full.m)
    trained = [load_config(overrides=list(spec.sets)) for spec in (candidate, full)]
    assert trained[0] == trained[1]


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
