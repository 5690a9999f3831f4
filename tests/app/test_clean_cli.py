"""`recsys clean` lists and removes what a SIGKILLed training left, and nothing alive."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from data import owner
from data.synth import generate_events
from tests.training.tiny import EVERY_POSITION, flags

REPO = Path(__file__).resolve().parents[2]
# a target at every position: a few steps an epoch
TINY = flags(["model.dim=16", "model.max_len=10", "model.num_layers=1", *EVERY_POSITION])


def _recsys(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RECSYS_HOME": str(home), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _kill_training_midway(home: Path, log: Path) -> Path:
    env = {**os.environ, "RECSYS_HOME": str(home), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "app", "train", "--dataset", str(log), "--version", "k1"]
    proc = subprocess.Popen(
        [*cmd, "--max-epochs", "200", *TINY], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    run = home / "runs" / "k1"
    deadline = time.monotonic() + 90
    while not (home / "runs" / "k1.owner.json").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, "training ended before it could be killed"
        time.sleep(0.1)
    time.sleep(1.0)  # inside the fit now
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return run


def test_clean_lists_then_removes_a_killed_run_only(tmp_path: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "log.csv"
    generate_events(200, 60, 4000, seed=1).write_csv(log)
    killed = _kill_training_midway(home, log)
    finished, live = home / "runs" / "done", home / "runs" / "live"
    for run in (finished, live):
        run.mkdir(parents=True)
        owner.claim(home / "runs" / f"{run.name}.owner.json")  # this test process
    owner.finish(home / "runs" / "done.owner.json")
    listed = _recsys("clean", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert [row["path"] for row in report["leftovers"]] == [str(killed)]
    assert "never finished" in report["leftovers"][0]["reason"] and not report["removed"]
    assert killed.exists()
    removed = _recsys("clean", "--yes", home=home)
    assert removed.returncode == 0 and "removed: 1 path(s)" in removed.stdout
    assert not killed.exists() and not (home / "runs" / "k1.owner.json").exists()
    assert finished.exists() and live.exists()
    assert "nothing to clean" in _recsys("clean", home=home).stdout


def test_clean_keeps_the_run_a_retrain_will_resume_and_waits_for_a_live_training(
    tmp_path: Path,
) -> None:
    from data.lock import training_lock
    from data.workspace import Workspace
    from training.workflows import journal

    home = tmp_path / "home"
    ws = Workspace(home)
    for name in ("pending", "dead"):  # two runs of a dead process (this test's pid is alive)
        (home / "runs" / name).mkdir(parents=True)
        (home / "runs" / f"{name}.owner.json").write_text(
            json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname()})  # beyond pid_max
        )
    journal.write(ws, {"key": "k", "version": "pending"})  # a killed retrain's attempt
    report = json.loads(_recsys("clean", "--json", home=home).stdout)
    assert [row["path"] for row in report["leftovers"]] == [str(home / "runs" / "dead")]
    with training_lock(ws, "retrain"):
        busy = _recsys("clean", "--yes", home=home)
    assert busy.returncode == 2 and f"pid {os.getpid()}" in busy.stderr
    assert (home / "runs" / "dead").exists()  # nothing removed while the home was busy
