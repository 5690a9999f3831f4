"""The tower study's `recsys tune` search: trials that differ from the run in tower keys only."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from benchmarks import records
from benchmarks.studies import tower_tune
from data.synth import generate_events
from training.workflows.tune import SEARCH_SPACE

TINY = ["model.dim=16", "train.batch_size=64", "train.max_epochs=2"]


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> tower_tune.Search:
    root = tmp_path_factory.mktemp("tune")
    (root / "data" / "amazon-beauty").mkdir(parents=True)
    log = generate_events(150, 80, 2000, seed=4)
    log.write_csv(root / "data" / "amazon-beauty" / "interactions.csv")
    return tower_tune.Search(
        minutes=0.5, data_root=root / "data", scratch=root / "scratch", out=root / "out", sets=TINY
    )


@pytest.mark.parametrize("spent", [0.0, 12.0, 30.0, 30.4, 75.0])
def test_every_sitting_caps_its_trial_at_the_minutes(spent: float) -> None:
    trials = 3
    budget = tower_tune.sitting_budget(30.0, trials, spent)
    assert min(budget / trials, budget - spent) == pytest.approx(30.0)


def test_trials_change_only_the_towers_keys_and_resume(search: tower_tune.Search) -> None:
    base = tower_tune.base_config("amazon-beauty", search).model_dump(mode="json")
    written = tower_tune.run_study("amazon-beauty", 2, search)
    assert [r["metrics"]["trial"] for r in written] == [0, 1]
    for number in (0, 1):
        record = records.read(search.record_path("amazon-beauty", number))
        got = record["metrics"]
        assert set(got["params"]) <= {"model.tower.num_layers", "model.tower.num_heads"}
        assert got["params"] and got["state"] == "complete" and 0 < got["val_ndcg@10"] <= 1
        assert got["max_minutes"] == pytest.approx(0.5)
        for key in SEARCH_SPACE:  # held at the study run's value
            section, name = key.split(".")
            assert record["config"][section][name] == base[section][name], key
        assert record["config"]["train"]["refit_epochs"] == 0
        assert record["config"]["model"]["tower"]["name"] == "sasrec"
    first, second = (r["metrics"]["params"] for r in written)
    assert first != second  # the second sitting's draws go on from the first's
    assert tower_tune.run_study("amazon-beauty", 2, search) == []  # both recorded: none again


def test_a_bsarec_run_searches_bsarecs_own_keys_in_a_folder_of_its_own(
    search: tower_tune.Search,
) -> None:
    bsarec = tower_tune.Search(
        run="bsarec-published-prefix", minutes=0.2, data_root=search.data_root,
        scratch=search.scratch, out=search.out, sets=[*TINY, "train.max_epochs=1"],
    )  # fmt: skip
    (record,) = tower_tune.run_study("amazon-beauty", 1, bsarec)
    assert record["run"] == "bsarec-published-prefix/amazon-beauty/trial-0"
    params = record["metrics"]["params"]
    assert params and set(params) <= {
        "model.tower.num_layers", "model.tower.num_heads", "model.tower.alpha",
        "model.tower.cutoff",
    }  # fmt: skip
    assert record["config"]["model"]["tower"]["name"] == "bsarec"
    assert record["config"]["train"]["targets"] == "last"  # the study run's setting, held


def test_refuses_a_run_the_study_does_not_plan(search: tower_tune.Search) -> None:
    unknown = tower_tune.Search(run="nope", out=search.out)
    with pytest.raises(typer.BadParameter, match="no run amazon-beauty/nope"):
        tower_tune.base_config("amazon-beauty", unknown)


def test_a_killed_trials_minutes_count_before_the_study_resumes(tmp_path: Path) -> None:
    from training.workflows.tune_study import MINUTES_RUN, open_study

    trial = open_study(tmp_path, 0, {"base": {}, "fixed": []}).ask()
    trial.set_user_attr(MINUTES_RUN, 20.0)  # its last record, then a kill: still "running"
    spent = tower_tune.spent_minutes(tmp_path)
    assert spent == pytest.approx(20.0)
    budget = tower_tune.sitting_budget(30.0, 2, spent)
    assert min(budget / 2, budget - spent) == pytest.approx(30.0)  # the retry gets its 30
