"""Owner records of work in progress: which process fills a folder, and whether it died.

A writer claims a folder before filling it (`claim`) and marks it finished at the end
(`finish`). A folder whose record names a process of this host that no longer runs, and that
was never finished, was left by a killed writer and may be removed (`abandoned_reason`). A
record from another host (a container sharing the volume) is never judged: its pid means
nothing here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

OWNER_FILE = ".owner.json"


def claim(folder: Path) -> None:
    """Record this process as the writer of `folder` (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder, {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time()})


def finish(folder: Path) -> None:
    """Mark `folder`'s work as done: it is never abandoned after this."""
    record = read_owner(folder) or {}
    _write(folder, {**record, "finished_at": time.time()})


def read_owner(folder: Path) -> dict[str, object] | None:
    """The folder's owner record, or None when it has none (or an unreadable one)."""
    try:
        record = json.loads((folder / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def abandoned_reason(folder: Path) -> str | None:
    """Why `folder` is a killed writer's leftover, or None when it is not (or cannot be told)."""
    record = read_owner(folder)
    if record is None or "finished_at" in record or record.get("host") != socket.gethostname():
        return None
    pid = record.get("pid")
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


def _write(folder: Path, record: dict[str, object]) -> None:
    tmp = folder / f"{OWNER_FILE}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, folder / OWNER_FILE)
