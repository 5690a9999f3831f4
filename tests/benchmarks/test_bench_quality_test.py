"""`bench quality-test`: a validation-only study's test split ranked once per run, and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import records
from benchmarks.sweeps import grids, sweep, test_once
from benchmarks.sweeps.sweep_grid import RunSpec
from data.errors import RecsysInputError
from data.synth import generate_events
from tests.benchmarks.helpers import SWEEP_TINY, run_bench

TINY = SWEEP_TINY
SPEC = RunSpec("tiny", "sasrec-ours", "full", None)
REFIT = RunSpec("tiny", "sasrec-refit", "full", None, sets=("train.refit_epochs=1",))


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> sweep.Sweep:
    """Two tiny runs, one refitted, whose records hold the trainer's own test figures."""
    root = tmp_path_factory.mktemp("study")
    (root / "data" / "tiny").mkdir(parents=True)
    generate_events(150, 80, 2000, seed=4).write_csv(root / "data" / "tiny" / "interactions.csv")
    settings = sweep.Sweep(
        root / "out" / "tower_study", root / "data", root / "scratch",
        [*TINY, "train.max_epochs=2"], {"enable_progress_bar": False},
    )  # fmt: skip
    done = sweep.run_sweep(lambda out: ([SPEC, REFIT], 2), settings)
    assert done == ["tiny/sasrec-ours", "tiny/sasrec-refit"]
    return settings


@pytest.fixture
def towers_at(study: sweep.Sweep, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(grids.RESULT_DIRS, "towers", study.out)
    return study.out.parent / "tower_study_test"


def test_ranks_test_from_the_kept_model_as_the_trainer_did(
    study: sweep.Sweep, towers_at: Path
) -> None:
    record = test_once.rank_test("towers", "tiny/sasrec-ours")
    trained = records.read(study.result_path(SPEC))["metrics"]
    test = record["metrics"]["test"]
    assert test["ndcg@10"]["mean"] == pytest.approx(trained["test"]["ndcg@10"], abs=1e-5)
    assert test["recall@10"]["mean"] == pytest.approx(trained["test"]["recall@10"], abs=1e-5)
    assert test["ndcg@10"]["low"] <= test["ndcg@10"]["mean"] <= test["ndcg@10"]["high"]
    assert record["metrics"]["test_rankings"] == 1 and record["study"] == "tower_study_test"
    assert record["metrics"]["val_ndcg@10"] == trained["val"]["ndcg@10"]
    assert (towers_at / "tiny" / "sasrec-ours.json").is_file()
    with pytest.raises(RecsysInputError, match="ranked 1 time"):
        test_once.rank_test("towers", "tiny/sasrec-ours")
    assert (
        test_once.rank_test("towers", "tiny/sasrec-ours", again=True)["metrics"]["test_rankings"]
        == 2
    )


def test_a_refitted_run_is_ranked_with_the_model_it_ships(
    study: sweep.Sweep, towers_at: Path
) -> None:
    trained = records.read(study.result_path(REFIT))["metrics"]
    assert trained["refit_epochs"] == 1
    record = test_once.rank_test("towers", "tiny/sasrec-refit")
    assert record["metrics"]["test"]["ndcg@10"]["mean"] == pytest.approx(
        trained["test"]["ndcg@10"], abs=1e-5
    )
    assert record["metrics"]["checkpoint"].startswith("the refit model")


def test_refuses_unknown_runs_grids_that_rank_test_and_lost_models(
    study: sweep.Sweep, towers_at: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(*args: str) -> str:
        done = run_bench(capsys, "quality-test", *args)
        assert done.returncode == 2
        return done.stderr

    (towers_at / "tiny" / "sasrec-ours.json").unlink(missing_ok=True)
    assert "no record" in refused("tiny/sasrec-ours", "tiny/nope")
    assert not (towers_at / "tiny" / "sasrec-ours.json").exists()  # refused before any ranked
    assert "rank test as they train" in refused("--grid", "final", "tiny/sasrec-ours")
    record = records.read(study.result_path(SPEC))
    moved = study.out / "tiny" / "moved.json"
    record["metrics"] = {**record["metrics"], "name": "moved", "run_dir": "/nonexistent/run"}
    records.save(moved, record["config"], record["metrics"], records.start(), root=study.out)
    assert "its model is gone" in refused("tiny/moved")
    assert not (towers_at / "tiny" / "moved.json").exists()
