"""`recsys train` never invents data in a home; synthetic demo and real events never mix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from data import store
from data.datasets import prepare_dataset
from data.synth import generate_events
from data.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]


def _recsys(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RECSYS_HOME": str(ws.root), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def _real_log(tmp_path: Path) -> Path:
    path = tmp_path / "real.csv"
    generate_events(40, 30, 400, seed=7).write_csv(path)
    return path


def test_train_without_dataset_on_an_empty_home_is_exit_2_and_stores_nothing(
    ws: Workspace,
) -> None:
    done = _recsys(ws, "train")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "has no events" in done.stderr
    assert "recsys ingest" in done.stderr and "--dataset synthetic" in done.stderr
    assert not store.has_events(ws) and not (ws.root / "synthetic").exists()


def test_synthetic_demo_refused_in_a_home_with_real_events(ws: Workspace, tmp_path: Path) -> None:
    assert _recsys(ws, "ingest", str(_real_log(tmp_path))).returncode == 0
    events = store.count_events(ws)
    done = _recsys(ws, "train", "--dataset", "synthetic")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "holds real events" in done.stderr and "--home" in done.stderr
    assert store.count_events(ws) == events


def test_real_logs_refused_in_a_home_holding_the_synthetic_demo(
    ws: Workspace, tmp_path: Path
) -> None:
    assert prepare_dataset(ws, "synthetic") == "synthetic"  # what `train --dataset synthetic` does
    sources = json.loads((ws.root / "ingested.json").read_text())
    assert list(sources.values()) == ["synthetic"]
    events = store.count_events(ws)
    real = str(_real_log(tmp_path))
    for args in (["ingest", real], ["train", "--dataset", real]):
        done = _recsys(ws, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "holds the synthetic demo events" in done.stderr and "--home" in done.stderr
    assert store.count_events(ws) == events
    assert prepare_dataset(ws, "synthetic") == prepare_dataset(ws, None) == "synthetic"
    assert store.count_events(ws) == events  # the demo is ingested once


def test_a_home_from_before_the_marker_is_recognised_by_the_demo_file(
    ws: Workspace, tmp_path: Path
) -> None:
    prepare_dataset(ws, "synthetic")
    record = ws.root / "ingested.json"
    legacy = str(ws.root / "synthetic" / "events-2000-1000-40000.csv")  # what it used to record
    record.write_text(json.dumps({k: legacy for k in json.loads(record.read_text())}))
    done = _recsys(ws, "ingest", str(_real_log(tmp_path)))
    assert done.returncode == 2 and "holds the synthetic demo events" in done.stderr
