"""`recsys bench ddp` on a tiny synthetic log: one row per process count, figures that add up."""

from __future__ import annotations

import json
import math
from pathlib import Path

from typer.testing import CliRunner

from app.cli import app


def test_bench_ddp_measures_one_and_two_processes(tmp_path: Path) -> None:
    out = tmp_path / "ddp.json"
    args = ["bench", "ddp", "--items", "300", "--users", "80", "--events", "3000"]
    args += ["--num-negatives", "8", "--scratch", str(tmp_path / "scratch"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    assert [row["processes"] for row in payload["rows"]] == [1, 2]
    windows = payload["setting"]["windows"]
    assert windows > 0 and out.with_suffix(".png").is_file()
    assert 0 < payload["setting"]["catalogue"] <= 300  # the items the log holds
    for row in payload["rows"]:
        assert row["threads_per_process"] * row["processes"] <= max(payload["cpus"], 2)
        assert math.isclose(row["examples_per_s"], windows / row["epoch_seconds"], rel_tol=1e-2)
        assert 0.0 < row["val_ndcg@10"] <= 1.0
