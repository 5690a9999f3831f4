"""What the benchmark tests share: `python -m benchmarks` in-process, a hand-made record, and
a tiny trained home."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.in_process import run_main
from tests.training.tiny import EVERY_POSITION

# a tiny model for the sweeps' runs, a target at every position: a few steps an epoch
SWEEP_TINY = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
              *EVERY_POSITION]  # fmt: skip


def run_bench(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks ARGS` in this process: its exit code and streams."""
    from benchmarks.cli import main

    return run_main(main, "benchmarks", capsys, *args)


def write_record(
    path: Path, metrics: dict[str, Any], config: dict[str, Any] | None = None, **machine: Any
) -> None:
    """A record at `path` of these metrics, config and machine facts (the others unknown)."""
    from benchmarks import records

    study, run = records.location(path)
    body = {
        "schema": records.SCHEMA, "study": study, "run": run,
        "commit": {"sha": None, "dirty": None}, "config": config,
        "machine": {**dict.fromkeys(records.MACHINE), **machine}, "wall_seconds": None,
        "metrics": metrics,
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))


def tiny_trained_home(tmp_path: Path) -> Path:
    """A home with one finished run: uniform m = 8, a tiny model, on a tiny synthetic log."""
    from benchmarks.sweeps.quality import run_quality
    from data.synth import generate_events

    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=4).write_csv(log)
    sets = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64"]
    home = tmp_path / "home"
    run_quality(str(log), ["uniform"], [8], tmp_path / "q", None, home, 1, sets,
                enable_progress_bar=False)  # fmt: skip
    return home
