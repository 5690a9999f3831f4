"""`bench data-pipeline` on a small log, its record, and outputs refused or written in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness.options import write_output
from tests.app.test_data_cli import run_inproc
from tests.benchmarks.helpers import run_bench


def test_bench_data_pipeline_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "bench.json"
    out = run_bench(capsys, "data-pipeline", "--events", "3000", "--out", str(result))
    assert out.returncode == 0, out.stderr
    record = records.read(result)
    assert record["config"] == {"events": 3000, "seed": 0} and record["wall_seconds"] > 0
    payload = record["metrics"]
    assert payload["accepted"] == 3000 and payload["reingest_rejected"] == 3000
    assert set(payload["seconds"]) >= {"synth", "ingest", "reingest", "split_loo", "split_time"}


def test_recsys_bench_refuses_an_unwritable_record_before_the_work(
    blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "data-pipeline", "--events", "3000", "--out", str(blocker / "x.json")]
    out = run_inproc(capsys, *args)  # through `recsys bench`
    assert out.returncode == 2 and "--out" in out.stderr and "synth:" not in out.stderr


def test_a_device_or_a_symlink_is_written_in_place_not_replaced(tmp_path: Path) -> None:
    require_writable({"--out": Path("/dev/null")})  # a device that takes writes: accepted
    write_output(Path("/dev/null"), lambda path: path.write_text("{}"))
    assert Path("/dev/null").is_char_device()  # still the device, not a file renamed over it
    target, link = tmp_path / "results.json", tmp_path / "link.json"
    link.symlink_to(target)
    records.save(link, None, {"a": 2}, records.start())
    assert link.is_symlink() and json.loads(target.read_text())["metrics"] == {"a": 2}
