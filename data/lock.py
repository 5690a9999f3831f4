"""One training at a time per home: an exclusive lock that names its holder.

`recsys train` and `recsys retrain` hold `<home>/.training.lock` (an `fcntl.flock`) for their
whole run, and write their pid, host, command and start time into the file. The kernel drops
the lock when its process dies, however it dies, so a lock left by a killed process is simply
taken by the next one; the record it left is overwritten.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from data.errors import RecsysInputError
from data.workspace import Workspace

LOCK_FILE = ".training.lock"


class HomeBusyError(RecsysInputError):
    """Another process trains on this home; the message names it."""


def _holder(handle: IO[str], wait: float = 1.0) -> str:
    """The lock record as words: "recsys retrain (pid 12, host h, since 2026-...Z)".

    A holder writes its record just after it takes the lock, so for up to `wait` seconds a
    record that names no live process (the last holder's, or none) is read again.
    """
    deadline = time.monotonic() + wait
    record = _record(handle)
    while not _names_a_live_process(record) and time.monotonic() < deadline:
        time.sleep(0.02)
        record = _record(handle)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.get("started_at", 0)))
    return (
        f"recsys {record.get('command', '?')} (pid {record.get('pid', '?')}, "
        f"host {record.get('host', '?')}, since {since})"
    )


def _record(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _names_a_live_process(record: dict[str, Any]) -> bool:
    """True for a live pid of this host, and for any holder on another host (not checkable)."""
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    if record.get("host") != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@contextmanager
def training_lock(ws: Workspace, command: str) -> Iterator[None]:
    """Hold the home's training lock while the block runs.

    Raises:
        HomeBusyError: another live process holds it (its pid, host and start time named).

    """
    ws.root.mkdir(parents=True, exist_ok=True)
    with open(ws.root / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HomeBusyError(
                f"{ws.root} is busy: {_holder(handle)} is training on it; wait for it to "
                "finish (or stop it: a killed holder releases the lock)"
            ) from None
        try:
            record = {
                "command": command,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started_at": time.time(),
            }
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
