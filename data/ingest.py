"""`ingest_files`, `ingest_rows`: validate events and append the good rows as one new part.

`ingest_files` reads log files; `ingest_rows` takes rows already in memory (`POST /events`).

Every row read ends up either accepted (in the new part) or rejected (in
`rejects/<ingest-id>.parquet` with a `reason`, `data.validate` lists them), so
`accepted + rejected == rows read`.

A file that cannot be read at all raises `RecsysInputError` before anything is written; so
does an ingest into a home holding the synthetic demo events (`ingested.json` names the source
`synthetic`): real events never mix with them.
The part and the rejects file are staged under temporary names and renamed into place, the
part first: that rename is the commit. The vocabularies are rewritten after it (they repair
themselves from the events if a crash lands in between; see `data.vocab`).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from data import store, vocab
from data.errors import RecsysInputError
from data.formats import RawRow, check_file, detect_format, raw_from_rows, read_raw
from data.validate import KEYS, classify, log_reasons, rejects
from data.workspace import Workspace

log = logging.getLogger("recsys.data.ingest")

SYNTHETIC_SOURCE = "synthetic"  # the source recorded for the generated demo log
HTTP_SOURCE = "POST /events"  # the source rejects files name for rows posted over HTTP


@dataclass(frozen=True)
class LogLayout:
    """How a log file is laid out: its format and the names of its three columns.

    Attributes:
        fmt: "csv", "parquet" or "ndjson" for every file; None picks it from each extension.
        user_col: Name of the user id column.
        item_col: Name of the item id column.
        time_col: Name of the timestamp column (integer Unix seconds or ISO-8601 text).

    """

    fmt: str | None = None
    user_col: str = "user_id"
    item_col: str = "item_id"
    time_col: str = "timestamp"


DEFAULT_LAYOUT = LogLayout()


@dataclass(frozen=True)
class IngestReport:
    """What one ingest did.

    Attributes:
        ingest_id: Names the part (`events/part-<id>.parquet`) and the rejects file.
        accepted: Rows appended to the store.
        rejected: Rows refused (see `rejects_path`).
        rejects_path: The rejects parquet, or None when nothing was rejected.
        events_total: Events in the store after this ingest.
        users_total: Users in the vocabulary after this ingest.
        items_total: Items in the vocabulary after this ingest.

    """

    ingest_id: str
    accepted: int
    rejected: int
    rejects_path: Path | None
    events_total: int
    users_total: int = 0
    items_total: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The `--json` payload: ingest_id, accepted, rejected, rejects_path, events_total."""
        out = asdict(self)
        out["rejects_path"] = str(self.rejects_path) if self.rejects_path else None
        return {
            k: out[k] for k in ("ingest_id", "accepted", "rejected", "rejects_path", "events_total")
        }


def ingested_sources(ws: Workspace) -> dict[str, str]:
    """`<home>/ingested.json`: sha256 of each file ingested (data.datasets) -> its source."""
    path = ws.ingested_path
    return json.loads(path.read_text()) if path.exists() else {}


def record_ingested(ws: Workspace, sources: dict[str, str]) -> None:
    """Add `sha256 -> source` entries to `<home>/ingested.json`; the caller holds the writer lock.

    (Read, merge, replace: two writers would lose one's entries.)
    """
    text = json.dumps({**ingested_sources(ws), **sources}, indent=1)
    store.atomic_write(ws.ingested_path, lambda tmp: tmp.write_text(text))


def holds_synthetic_demo(ws: Workspace) -> bool:
    """True when the home's events are the generated demo log of `--dataset synthetic`.

    Homes from before the `synthetic` source was recorded name the demo file itself,
    `<home>/synthetic/events-<users>-<items>-<events>.csv` (in this home: a user's own
    `synthetic/events-...csv` elsewhere is not the demo).
    """

    def is_demo(source: str) -> bool:
        path = Path(source)  # relative to the directory it was recorded from: match the name
        named = path.parent.name == "synthetic" and path.match("events-*-*-*.csv")
        here = (ws.root / "synthetic" / path.name).is_file()
        return source == SYNTHETIC_SOURCE or (named and here)

    return any(map(is_demo, ingested_sources(ws).values())) and store.has_events(ws)


def new_ingest_id() -> str:
    """A sortable, unique ingest id: UTC time plus random hex."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def _read_all(paths: list[Path], fmt: str | None, cols: tuple[str, str, str]) -> pl.DataFrame:
    if not paths:
        raise RecsysInputError("no input files given")
    frames, kinds = [], []
    for no, path in enumerate(paths):
        check_file(path)  # "no such file" says more than "unknown extension"
        kinds.append(detect_format(path, fmt))
        log.debug("reading %s (%s)", path, kinds[-1])
        frames.append(read_raw(path, kinds[-1], *cols, file_no=no))
    # Logged only once every file is read: an unreadable file gives exactly one stderr line.
    for path, kind, frame in zip(paths, kinds, frames, strict=True):
        log.info("read %d rows from %s (%s)", frame.height, path, kind)
    return pl.concat(frames).with_row_index("_i")


def ingest_files(
    ws: Workspace,
    paths: list[Path],
    layout: LogLayout = DEFAULT_LAYOUT,
    record: dict[str, str] | None = None,
) -> IngestReport:
    """Validate the files and append their good rows to the store as one new part.

    Args:
        ws: The workspace to ingest into.
        paths: Log files (all read before anything is written).
        layout: Their format and column names (default: by extension; user_id, item_id,
            timestamp).
        record: `sha256 -> source` entries for `ingested.json`, written with the commit under
            the writer lock; the source `synthetic` marks the demo log, which goes only into a
            home with no events.

    Returns:
        The report (see `IngestReport`).

    Raises:
        RecsysInputError: a file cannot be read or lacks a column, or the home holds the
            synthetic demo events (the demo: any events); nothing is stored then.

    """
    _refuse_mixing(ws, record or {})  # before reading: a big file is not read for nothing
    columns = (layout.user_col, layout.item_col, layout.time_col)
    raw = _read_all([Path(p) for p in paths], layout.fmt, columns)
    return _ingest(ws, raw, [str(p) for p in paths], record or {})[0]


def ingest_rows(
    ws: Workspace, rows: Sequence[RawRow], source: str = HTTP_SOURCE
) -> tuple[IngestReport, pl.DataFrame]:
    """Validate in-memory rows and append the good ones as one new part, as `ingest_files` does.

    The same reasons, duplicate checks, rejects file (with `source` for every row), lock and
    atomic commit as a file ingest: only the reading differs (`formats.raw_from_rows`).

    Args:
        ws: The workspace to ingest into.
        rows: (user_id, item_id, timestamp) each; timestamps as integer Unix seconds or
            ISO-8601 text, None where a value is missing.
        source: What the rejects file names as the rows' source.

    Returns:
        The report, and the rejected rows (`source, row, user_id, item_id, timestamp, reason`,
        `row` 1-based in `rows`, `timestamp` as text), empty when every row was accepted.

    Raises:
        RecsysInputError: the home holds the synthetic demo events; nothing is stored then.

    """
    return _ingest(ws, raw_from_rows(rows).with_row_index("_i"), [source])  # checked in its lock


def _refuse_demo_home(ws: Workspace) -> None:
    """Real events never mix with the synthetic demo log."""
    if holds_synthetic_demo(ws):
        raise RecsysInputError(
            f"{ws.root} holds the synthetic demo events (--dataset synthetic); real logs would "
            "mix with them: use a separate --home"
        )


def _refuse_mixing(ws: Workspace, record: dict[str, str]) -> None:
    """The demo log only into a home with no events, real events never into the demo's.

    Checked under the writer lock: another writer may have committed since the first check.
    """
    if SYNTHETIC_SOURCE not in record.values():
        _refuse_demo_home(ws)
    else:
        refuse_demo_into_events(ws)


def refuse_demo_into_events(ws: Workspace) -> None:
    """The synthetic demo log goes only into a home with no events (RecsysInputError)."""
    if store.has_events(ws):
        raise RecsysInputError(
            f"{ws.root} holds real events: synthetic demo events would mix with them; "
            "use a separate --home for the demo"
        )


def _ingest(
    ws: Workspace, raw: pl.DataFrame, sources: list[str], record: dict[str, str] | None = None
) -> tuple[IngestReport, pl.DataFrame]:
    """Classify `raw` and commit its good rows as one part (the core of both ingests).

    `record` (see `ingest_files`) is written after the commit, before the lock is released.
    """
    with store.writer_lock(ws):  # one writer at a time: event_seq and vocab need a stable base
        _refuse_mixing(ws, record or {})
        df = classify(ws, raw)
        start = store.count_events(ws)
        old_vocab = {"item": vocab.load_item_vocab(ws), "user": vocab.load_user_vocab(ws)}
        accepted = df.filter(pl.col("reason").is_null()).select(
            *KEYS, (pl.int_range(pl.len(), dtype=pl.Int64) + start).alias("event_seq")
        )
        rejected = rejects(df, sources)
        assert accepted.height + rejected.height == raw.height  # every row is accounted for
        log_reasons(rejected)
        ingest_id = new_ingest_id()
        rejects_path = _commit(ws, ingest_id, accepted, rejected)
        # the vocabularies as this ingest leaves them (not read back: another writer's could be)
        sizes = {kind: table.height for kind, table in old_vocab.items()}
        if accepted.height:
            sizes = vocab.update_vocabs(ws, old_vocab, accepted)
        if record:
            record_ingested(ws, record)
    report = IngestReport(
        ingest_id,
        accepted.height,
        rejected.height,
        rejects_path,
        start + accepted.height,
        users_total=sizes["user"],
        items_total=sizes["item"],
    )
    return report, rejected


def _commit(
    ws: Workspace, ingest_id: str, accepted: pl.DataFrame, rejected: pl.DataFrame
) -> Path | None:
    """Stage rejects and part, rename the part (the commit), then the rejects.

    A failure before the part's rename removes the staged files and leaves the store as it was.
    """
    rejects_path = ws.rejects_dir / f"{ingest_id}.parquet" if rejected.height else None
    part = store.part_path(ws, ingest_id)
    staged: dict[Path, Path] = {}
    try:
        if rejects_path is not None:
            staged[rejects_path] = store.stage_parquet(rejected, rejects_path)
        if accepted.height:
            staged[part] = store.stage_parquet(accepted, part)
            store.commit(staged[part], part)
            del staged[part]
            log.info("committed %d events as %s", accepted.height, part)
        if rejects_path is not None:
            store.commit(staged[rejects_path], rejects_path)
            del staged[rejects_path]
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
    return rejects_path
