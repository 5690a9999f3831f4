"""Owner records of work in progress: which process fills a folder, and whether it died.

A writer claims its work before doing it (`claim`, a small JSON record file the caller names:
inside a temp folder, or beside a folder that others write into too) and marks it finished at
the end (`finish`). Work whose record names a process of this host that no longer runs, and
that was never finished, was left by a killed writer and may be removed (`abandoned_reason`).
A record from another host (a container sharing the volume) is never judged: its pid means
nothing here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

OWNER_FILE = ".owner.json"  # the record's name inside a temp folder


def claim(record: Path) -> None:
    """Record this process as the writer (its folder is created if missing)."""
    record.parent.mkdir(parents=True, exist_ok=True)
    _write(record, {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time()})


def finish(record: Path) -> None:
    """Mark the work as done: it is never abandoned after this."""
    _write(record, {**(read_owner(record) or {}), "finished_at": time.time()})


def read_owner(record: Path) -> dict[str, object] | None:
    """The owner record, or None when there is none (or an unreadable one)."""
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def abandoned_reason(record: Path) -> str | None:
    """Why the work is a killed writer's leftover, or None when it is not (or cannot be told)."""
    data = read_owner(record)
    if data is None or "finished_at" in data or data.get("host") != socket.gethostname():
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or pid_alive(pid):
        return None
    return f"its writer (pid {pid}) is gone and never finished"


def pid_alive(pid: int) -> bool:
    """A process with this pid runs on this host (a reused pid reads as alive: the safe side)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(record: Path, data: dict[str, object]) -> None:
    tmp = record.with_name(f"{record.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, record)
