"""`recsys retrain` killed with SIGKILL at several points, then run again: nothing lost or doubled.

A real `recsys retrain` process is killed once its ingest has committed the new part, once
it has written a training checkpoint, during the refit of its kept round, and once training
is over but nothing is published (while it evaluates, writes the candidate bundle or runs the
gate).
After every kill the served model is untouched (a running server still serves it) and the
event store holds no duplicate; the same command run again resumes (from the checkpoint: it
trains only the epochs left) and publishes, and the server switches to it by itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import polars as pl
import pytest
import torch

from data import store
from data.ingest import ingest_files
from data.synth import generate_events
from data.workspace import Workspace
from model.bundle import ModelBundle, current_version, read_manifest
from tests.app.test_api_reload import wait_for
from tests.serving.server import running_server
from tests.training.tiny import EVERY_POSITION

RECSYS = str(Path(sys.executable).parent / "recsys")
REFIT = 3  # `train.refit_epochs` and `retrain.refit_epochs`
TINY = [
    "model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
    "sampler.name=midx", "sampler.num_negatives=32",  # a sampler's state through the kill
    "eval.ks=[10,20]", "train.threads=1",
    f"train.refit_epochs={REFIT}", f"retrain.refit_epochs={REFIT}",
    *EVERY_POSITION,  # a target at every position: a few steps an epoch
]  # fmt: skip
EPOCHS = 6
USER = "u0"  # a user of the first log, known to every model


def _sets() -> list[str]:
    return [arg for item in TINY for arg in ("--set", item)]


def _recsys(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [RECSYS, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _retrain(home: Path, new: Path) -> subprocess.Popen[str]:
    return _recsys(
        "retrain", "--home", str(home), "--logs", str(new), "--max-epochs", str(EPOCHS),
        "--set", "retrain.tolerance=1.0", "--set", "retrain.patience=50", "--json",
    )  # fmt: skip


def _kill_when(
    proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float = 120
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return
        time.sleep(0.002)
    _, err = proc.communicate()
    pytest.fail(f"the kill point was never reached (exit {proc.returncode}): {err[-2000:]}")


def _assert_consistent(ws: Workspace, served: str, expected_max: int, api: httpx.Client) -> None:
    """Served model untouched (the running server's too); events without duplicates, never more
    than the logs hold."""
    assert current_version(ws.models_dir) == served
    ModelBundle.load(ws.models_dir / served)
    assert api.get("/ready").json()["model_version"] == served
    answer = api.get("/recommend", params={"user_id": USER, "k": 5})
    assert answer.status_code == 200 and len(answer.json()["items"]) == 5
    events = store.read_events(ws).collect()
    assert events.height <= expected_max
    assert events.select("user_id", "item_id", "timestamp").is_duplicated().sum() == 0


def _version(ws: Workspace) -> str | None:
    if not ws.retrain_journal_path.is_file():
        return None
    return str(json.loads(ws.retrain_journal_path.read_text())["version"])


def _exporting(ws: Workspace) -> bool:
    """A candidate bundle is being written, or written and not yet published."""
    version = _version(ws)
    return any(p.name.startswith(".tmp-") for p in ws.models_dir.iterdir()) or bool(
        version and (ws.models_dir / version).is_dir()
    )


def _refitting(ws: Workspace) -> bool:
    """The fit is recorded as finished and its refit is not saved: the gate's rows or the refit."""
    folder = ws.runs_dir / str(_version(ws)) / "checkpoints"
    return (folder / "fit.json").is_file() and not (folder / "refit.ckpt").is_file()


def _checkpoint(ws: Workspace) -> Path | None:
    version = _version(ws)
    path = ws.runs_dir / str(version) / "checkpoints" / "last.ckpt"
    return path if version and path.is_file() else None


@pytest.mark.slow  # over 10 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_sigkill_at_ingest_training_and_export_then_the_rerun_resumes(tmp_path: Path) -> None:
    events = generate_events(200, 120, 3000, seed=2)
    cuts = events["timestamp"].quantile(0.7), events["timestamp"].quantile(0.85)
    logs = [tmp_path / name for name in ("old.csv", "new_a.csv", "new_b.csv")]
    events.filter(pl.col("timestamp") < cuts[0]).write_csv(logs[0])
    events.filter(pl.col("timestamp").is_between(*cuts, closed="left")).write_csv(logs[1])
    events.filter(pl.col("timestamp") >= cuts[1]).write_csv(logs[2])
    ws = Workspace(tmp_path / "home")
    first = _recsys("train", "--home", str(ws.root), "--dataset", str(logs[0]), "--version", "v1",
                    "--max-epochs", "2", *_sets())  # fmt: skip
    assert first.wait() == 0, first.communicate()[1][-2000:]
    base_parts = len(store.part_paths(ws))
    with running_server(ws.root) as url, httpx.Client(base_url=url, timeout=30) as api:
        # 1. just after the ingest committed the new part
        _kill_when(_retrain(ws.root, logs[1]), lambda: len(store.part_paths(ws)) > base_parts)
        _assert_consistent(ws, "v1", events.height, api)
        # 2. once a training checkpoint exists: the re-run continues from it, on the events and
        # items the killed attempt saw (others ingested meanwhile, new items among them, wait),
        # and `recsys clean` leaves its run alone
        _kill_when(_retrain(ws.root, logs[1]), lambda: _checkpoint(ws) is not None)
        _assert_consistent(ws, "v1", events.height, api)
        meanwhile = tmp_path / "meanwhile.csv"
        meanwhile.write_text(
            "user_id,item_id,timestamp\nu-late,brand-new-a,1\nu-late,brand-new-b,2\n"
        )
        ingest_files(ws, [meanwhile])  # as `recsys ingest` or POST /events would
        total = events.height + 2
        cleaner = _recsys("clean", "--home", str(ws.root), "--json")
        assert json.loads(cleaner.communicate(timeout=60)[0])["leftovers"] == []
        ckpt = _checkpoint(ws)
        assert ckpt is not None
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        timed = next(v for k, v in state["callbacks"].items() if k.startswith("EpochTimer"))
        before = timed["epoch_seconds"]
        version = _finish(ws, logs[1])
        wait_for(lambda: api.get("/ready").json()["model_version"] == version)
        assert read_manifest(ws.models_dir / version).epochs == EPOCHS  # the killed run's count
        record = json.loads((ws.runs_dir / version / "checkpoints" / "fit.json").read_text())
        assert before and record["epoch_seconds"][: len(before)] == before  # continued, not redone
        # 3. during the refit: the re-run refits the finished fit's kept round again
        _kill_when(_retrain(ws.root, logs[2]), lambda: _refitting(ws))
        _assert_consistent(ws, version, total, api)
        # 4. once the candidate bundle is being written or gated, before the publish
        _kill_when(_retrain(ws.root, logs[2]), lambda: _exporting(ws))
        _assert_consistent(ws, version, total, api)
        refit = _finish(ws, logs[2])
        wait_for(lambda: api.get("/ready").json()["model_version"] == refit)
        assert refit != version and read_manifest(ws.models_dir / refit).refit_epochs == REFIT
        assert store.read_events(ws).collect().height == total  # every event, once


def _finish(ws: Workspace, log: Path) -> str:
    """Run the retrain to the end; the version it published."""
    final = _retrain(ws.root, log)
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err[-2000:]
    assert not ws.retrain_journal_path.exists()
    version = current_version(ws.models_dir)
    assert version is not None
    return version
