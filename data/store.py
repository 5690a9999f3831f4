"""The event store: append-only parquet parts under `events/`, and atomic file writes.

Each ingest adds one part `events/part-<ingest-id>.parquet` with columns
`user_id: str, item_id: str, timestamp: int64, event_seq: int64`. `event_seq` is the global
arrival order across all ingests (0, 1, 2, ... with no gaps), so "the order events arrived in"
survives any reading order of the parts. A part is written under a temporary name, fsynced and
renamed into place (the folder fsynced after), so a reader never sees half a part and a crash,
even a power loss, leaves the store as it was.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from data.workspace import Workspace

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "user_id": pl.String(),
    "item_id": pl.String(),
    "timestamp": pl.Int64(),
    "event_seq": pl.Int64(),
}
PART_GLOB = "part-*.parquet"
TMP_PREFIX = ".tmp-"


def part_paths(ws: Workspace) -> list[Path]:
    """The committed event parts, in name order (names are not the event order: use event_seq)."""
    if not ws.events_dir.is_dir():
        return []
    return sorted(ws.events_dir.glob(PART_GLOB))


def has_events(ws: Workspace) -> bool:
    """True when at least one part with at least one event has been committed."""
    return count_events(ws) > 0


def read_events(ws: Workspace, parts: list[Path] | None = None) -> pl.LazyFrame:
    """Stored events as a lazy frame (`EVENT_SCHEMA`); an empty frame when there are none.

    Args:
        ws: The workspace.
        parts: Read only these parts (a listing taken earlier); default: every committed part.

    """
    parts = part_paths(ws) if parts is None else parts
    if not parts:
        return pl.LazyFrame(schema=EVENT_SCHEMA)
    return pl.scan_parquet(parts).select(list(EVENT_SCHEMA))


def count_events(ws: Workspace) -> int:
    """Number of stored events (read from the parquet footers, not the data)."""
    parts = part_paths(ws)
    if not parts:
        return 0
    return int(pl.scan_parquet(parts).select(pl.len()).collect().item())


def fsync_file(path: Path) -> None:
    """Force a written file's data to disk (a power loss must not leave it empty)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in folder `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` on a temporary sibling of `path`, then rename it onto `path`.

    The rename is atomic on one filesystem, so readers see either the old file or the new one;
    the file is fsynced before it and the folder after it, so a power loss cannot leave an empty
    or truncated file under the final name. The temporary file is removed if `write` fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{path.name}")
    try:
        write(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    """Write `df` to `path` as parquet, atomically (see `atomic_write`)."""
    atomic_write(path, lambda tmp: df.write_parquet(tmp))


def stage_parquet(df: pl.DataFrame, path: Path) -> Path:
    """Write `df`, fsynced, under a temporary name next to `path`; `commit` renames it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{path.name}")
    df.write_parquet(tmp)
    fsync_file(tmp)
    return tmp


def commit(tmp: Path, path: Path) -> None:
    """Rename a staged file onto its final name (atomic), and make the rename durable."""
    os.replace(tmp, path)
    fsync_dir(path.parent)


def part_path(ws: Workspace, ingest_id: str) -> Path:
    """Where the part of one ingest lives."""
    return ws.events_dir / f"part-{ingest_id}.parquet"


@contextmanager
def writer_lock(ws: Workspace) -> Iterator[None]:
    """Hold an exclusive lock on the workspace's store while writing (waits for other writers).

    Readers never take it: they only see committed (renamed) files.
    """
    ws.root.mkdir(parents=True, exist_ok=True)
    with (ws.root / ".ingest.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            _remove_stale_temps(ws)
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_stale_temps(ws: Workspace) -> None:
    """Delete temporary files a crashed writer left (safe: we hold the writer lock)."""
    for folder in (ws.events_dir, ws.rejects_dir, ws.vocab_dir):
        if folder.is_dir():
            for tmp in folder.glob(f"{TMP_PREFIX}*"):
                tmp.unlink(missing_ok=True)
    # the home's own files: only ingested.json is written under this lock
    for tmp in ws.root.glob(f"{TMP_PREFIX}*-{ws.ingested_path.name}"):
        tmp.unlink(missing_ok=True)
