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
from typing import IO

from data.errors import RecsysInputError
from data.workspace import Workspace

LOCK_FILE = ".training.lock"


class HomeBusyError(RecsysInputError):
    """Another process trains on this home; the message names it."""


def _holder(handle: IO[str]) -> str:
    """The lock record as words: "recsys retrain (pid 12, host h, since 2026-...Z)"."""
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except ValueError:
        record = {}
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.get("started_at", 0)))
    return (
        f"recsys {record.get('command', '?')} (pid {record.get('pid', '?')}, "
        f"host {record.get('host', '?')}, since {since})"
    )


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
