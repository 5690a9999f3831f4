"""The home's training lock, held by real processes: the holder named, a killed one replaced."""

from __future__ import annotations

import calendar
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from data.lock import LOCK_FILE, RECORD_WAIT, HomeBusyError, training_lock
from data.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]

HOLD = """
import sys, time
from pathlib import Path
from data.lock import training_lock
from data.workspace import Workspace
with training_lock(Workspace(Path(sys.argv[1])), "retrain"):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(ws: Workspace) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the home's lock as `recsys retrain` would."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ws.root)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def held_without_a_record(ws: Workspace, record: dict[str, Any]) -> Iterator[Path]:
    """The lock held through another handle, the file holding `record` (a holder's first
    moment, or a stale record); yields the lock file."""
    ws.root.mkdir(parents=True, exist_ok=True)
    path = ws.root / LOCK_FILE
    path.write_text(json.dumps(record))
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield path


def _since(message: str) -> float:
    """The start time a refusal names, in Unix seconds."""
    found = re.search(r"since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", message)
    assert found, message
    return calendar.timegm(time.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ"))


def test_a_live_holder_is_named_with_its_pid_host_and_start_time(
    ws: Workspace, holder: subprocess.Popen[str]
) -> None:
    started = json.loads((ws.root / LOCK_FILE).read_text())["started_at"]
    with pytest.raises(HomeBusyError) as err, training_lock(ws, "train"):
        pytest.fail("the lock was taken while another process held it")
    message = str(err.value)
    assert f"recsys retrain (pid {holder.pid}, host {socket.gethostname()}, since" in message
    assert abs(_since(message) - started) < 1 and abs(started - time.time()) < 60


def test_a_killed_holders_lock_is_taken_and_its_record_replaced(
    ws: Workspace, holder: subprocess.Popen[str]
) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    left = json.loads((ws.root / LOCK_FILE).read_text())
    assert left["pid"] == holder.pid  # the killed holder's record is still there
    taken = time.time()
    with training_lock(ws, "train"):
        record = json.loads((ws.root / LOCK_FILE).read_text())
    assert (record["pid"], record["command"]) == (os.getpid(), "train")
    assert record["started_at"] >= taken


def test_a_new_holder_is_named_even_before_its_record_is_written(ws: Workspace) -> None:
    """Between a holder's lock and its record the file still names the last (dead) holder."""
    dead = {"command": "train", "pid": 999_999_999, "host": socket.gethostname()}
    new = {"command": "retrain", "pid": os.getppid(), "host": socket.gethostname()}  # alive
    with held_without_a_record(ws, dead) as path:

        def write_record() -> None:
            time.sleep(0.2)
            path.write_text(json.dumps({**new, "started_at": time.time()}))

        writer = threading.Thread(target=write_record)
        writer.start()
        with pytest.raises(HomeBusyError) as err, training_lock(ws, "train"):
            pytest.fail("the lock was taken while another holder had it")
        writer.join()
    assert f"recsys retrain (pid {os.getppid()}," in str(err.value)


@pytest.mark.parametrize("pid", [2**40, 0, -1, True, "12", "own"])
def test_a_record_naming_no_live_holder_is_named_after_the_wait(ws: Workspace, pid: object) -> None:
    pid = os.getpid() if pid == "own" else pid  # ours: we do not hold it, so it is stale
    record = {"command": "train", "pid": pid, "host": socket.gethostname()}
    with held_without_a_record(ws, record):
        start = time.monotonic()
        with pytest.raises(HomeBusyError, match="recsys train"), training_lock(ws, "train"):
            pytest.fail("the lock was taken while another holder had it")
    assert RECORD_WAIT <= time.monotonic() - start < RECORD_WAIT + 2


def test_a_holder_on_another_host_is_named_at_once(ws: Workspace) -> None:
    record = {"command": "retrain", "pid": 7, "host": "elsewhere", "started_at": 0}
    with held_without_a_record(ws, record):
        start = time.monotonic()
        with pytest.raises(HomeBusyError, match=r"pid 7, host elsewhere"), training_lock(ws, "x"):
            pytest.fail("the lock was taken while another holder had it")
    assert time.monotonic() - start < RECORD_WAIT / 2


def test_a_holder_that_ends_cleanly_leaves_no_record(ws: Workspace) -> None:
    with training_lock(ws, "train"):
        assert json.loads((ws.root / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert (ws.root / LOCK_FILE).read_text() == ""
