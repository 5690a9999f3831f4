"""`bench events` against a real server: every posted batch is stored and timed."""

import json
from pathlib import Path

import pytest

from tests.benchmarks.helpers import run_bench


def test_bench_events_times_post_then_recommend_on_an_empty_and_a_filled_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "events.json"
    result = run_bench(
        capsys, "events", "--stored", "0,2000", "--items", "300", "--repeats", "3",
        "--out", str(out_json),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    runs = record["metrics"]["runs"]
    assert record["config"]["stored"] == [0, 2000] and record["wall_seconds"] > 0
    assert [run["stored_events"] for run in runs] == [0, 2000]
    for run in runs:
        post, total = run["post_ms"], run["post_then_recommend_ms"]
        assert post["rounds"] == total["rounds"] == 3  # every POST accepted (else it raises)
        assert 0 < post["p50"] <= post["p95"] <= post["max"]
        assert 0 < total["p50"] <= total["p95"] <= total["max"]


def test_bench_events_refuses_a_negative_store_size(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_bench(capsys, "events", "--stored", "0,-5")
    assert result.returncode == 2
    assert "--stored: values must be at least 0" in result.stderr


def test_bench_events_refuses_an_unwritable_result_file_before_the_work(
    blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_bench(
        capsys, "events", "--stored", "0", "--items", "300", "--repeats", "1",
        "--out", str(blocker / "events.json"),
    )  # fmt: skip
    assert result.returncode == 2 and "--out" in result.stderr and "is a file" in result.stderr
