"""`bench ddp` on a tiny synthetic log: one row per process count, figures that add up."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.cli import bench_app
from benchmarks.speed.ddp import covering
from data.synth import generate_events
from tests.benchmarks.helpers import run_bench


@pytest.mark.slow  # over 10 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_bench_ddp_measures_one_and_two_processes(tmp_path: Path) -> None:
    out = tmp_path / "ddp.json"
    args = ["ddp", "--items", "300", "--users", "80", "--events", "3000"]
    args += ["--num-negatives", "8", "--scratch", str(tmp_path / "scratch"), "--out", str(out)]
    args += ["--sharded"]
    result = CliRunner().invoke(bench_app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    rows = [(row["processes"], row["sharded"]) for row in record["metrics"]["rows"]]
    assert rows == [(1, False), (2, False), (2, True)]
    windows = record["config"]["windows"]
    assert windows > 0 and out.with_suffix(".png").is_file()
    assert record["config"]["catalogue"] == 300  # every item: the log's misses are covered
    for row in record["metrics"]["rows"]:
        assert row["threads_per_process"] * row["processes"] <= max(record["machine"]["cores"], 2)
        assert math.isclose(row["examples_per_s"], windows / row["epoch_seconds"], rel_tol=1e-2)
        assert 0.0 < row["val_ndcg@10"] <= 1.0


def test_covering_users_visit_every_item_the_log_missed() -> None:
    log = generate_events(50, 400, 600, seed=1)
    covered = covering(log, 400, per_user=20)
    assert covered.head(log.height).equals(log)  # the log itself is unchanged
    assert covered["item_id"].n_unique() == 400 and covered.height == log.height + (
        400 - log["item_id"].n_unique()
    )
    extra = covered.tail(covered.height - log.height)
    assert extra["item_id"].n_unique() == extra.height  # each missing item once
    assert extra.group_by("user_id").len()["len"].max() <= 20


@pytest.mark.parametrize("option", ["--items", "--users", "--events", "--num-negatives"])
def test_bench_ddp_refuses_a_zero_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    scratch = tmp_path / "scratch"
    args = ["--items", "300", "--users", "80", "--events", "3000", "--num-negatives", "8"]
    args[args.index(option) + 1] = "0"
    done = run_bench(capsys, "ddp", *args, "--processes", "1", "--scratch",
                      str(scratch), "--out", str(tmp_path / "ddp.json"))  # fmt: skip
    assert done.returncode == 2 and option in done.stderr and not scratch.exists()


def test_bench_ddp_refuses_an_unwritable_result_file_before_the_work(
    tmp_path: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch = tmp_path / "scratch"
    done = run_bench(
        capsys, "ddp", "--items", "300", "--users", "80", "--events", "3000",
        "--processes", "1", "--scratch", str(scratch), "--out", str(blocker / "ddp.json"),
    )  # fmt: skip
    assert done.returncode == 2 and "--out" in done.stderr and not scratch.exists()
