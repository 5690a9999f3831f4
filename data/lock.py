"""One training at a time per home: an exclusive lock that names its holder.

`recsys train` and `recsys retrain` hold `<home>/.training.lock` (an `fcntl.flock`) for their
whole run, and write their pid, host, command and start time into the file; a holder that ends
cleanly empties it. The kernel drops the lock when its process dies, however it dies, so a lock
left by a killed process is simply taken by the next one; the record it left is overwritten. A
refusal names the holder from that record, read again for up to `RECORD_WAIT` seconds while
it names no live process of this host (a new holder writes it just after it takes the lock).
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
RECORD_WAIT = 1.0  # seconds a refusal waits for the holder's record (see the module docstring)


class HomeBusyError(RecsysInputError):
    """Another process trains on this home; the message names it."""


def _holder(handle: IO[str]) -> str:
    """The lock record as words: "recsys retrain (pid 12, host h, since 2026-...Z)".

    A holder writes its record just after it takes the lock, so for up to `RECORD_WAIT`
    seconds a record that names no live process (a killed holder's, or none) is read again.
    """
    deadline = time.monotonic() + RECORD_WAIT
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
    """Whether the record names a live holder.

    True for a live pid of this host other than ours (we do not hold the lock), and for any
    holder on another host (not checkable).
    """
    pid = record.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    if record.get("host") != socket.gethostname():
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's
        return True
    except (OSError, OverflowError):  # no such process (or no such pid)
        return False
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
            handle.seek(0)
            handle.truncate()  # a record left names a holder that is gone: see _holder
            fcntl.flock(handle, fcntl.LOCK_UN)
