"""Where a training's events come from: a dataset by path or name, or the synthetic demo.

`prepare_dataset` ingests a dataset into the home once (by the files' sha256), with the titles
of a folder's `items.csv`; `recsys train --dataset` and `recsys retrain --logs` go through it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import polars as pl

from data import store, vocab
from data.errors import RecsysInputError
from data.ingest import (
    DEFAULT_LAYOUT,
    SYNTHETIC_SOURCE,
    IngestReport,
    LogLayout,
    holds_synthetic_demo,
    ingest_files,
    ingested_sources,
    record_ingested,
    refuse_demo_into_events,
)
from data.synth import DEFAULT_SYNTHETIC, generate_events, write_events
from data.workspace import Workspace

log = logging.getLogger(__name__)

LOG_SUFFIXES = (".csv", ".parquet", ".pq", ".ndjson", ".jsonl")
TITLES_FILE = "items.csv"  # a dataset folder's item titles, never one of its logs
DATASETS_ENV_VAR = "RECSYS_DATASETS"


def fingerprint(path: Path) -> str:
    """sha256 of a file's contents (hex): what `ingested.json` remembers of an ingested file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ingest_once(
    ws: Workspace, files: list[Path], source: str | None = None, layout: LogLayout = DEFAULT_LAYOUT
) -> IngestReport | None:
    """Ingest those of `files` (laid out as `layout` says) not ingested into this home before.

    Returns:
        The ingest's report of the new files, or None when every file was ingested before.

    """
    seen = ingested_sources(ws) if store.has_events(ws) else {}
    prints = {f: fingerprint(f) for f in files}
    new = [f for f in files if prints[f] not in seen]
    if not new:
        log.info("already ingested into %s; not ingesting again", ws.root)
        return None
    report = ingest_files(ws, new, layout, {prints[f]: source or _source(f) for f in new})
    log.info("ingested %d events (%d rejected)", report.accepted, report.rejected)
    return report


def ingest_recorded(
    ws: Workspace, files: list[Path], layout: LogLayout = DEFAULT_LAYOUT, source: str | None = None
) -> IngestReport:
    """Ingest `files` and record each one's sha256 in `ingested.json` with its `source`.

    The record is written after the part is committed, under the same writer lock (default
    source: the file's absolute path). A process killed between the two re-reads the files on
    the next `ingest_once`, and the store's duplicate check rejects every row it already holds.
    """
    record = {fingerprint(f): source or _source(f) for f in files if Path(f).is_file()}
    return ingest_files(ws, files, layout, record)


def _source(path: Path) -> str:
    """A file's recorded source: its absolute path (a file named `synthetic` is not the demo)."""
    return str(Path(path).resolve())


def dataset_files(path: Path) -> list[Path]:
    """The log files of a dataset path: the file, a folder's interactions.csv, or its logs."""
    if path.is_file():
        return [path]
    if (path / "interactions.csv").is_file():
        return [path / "interactions.csv"]
    files = sorted(
        p for p in path.iterdir() if p.suffix.lower() in LOG_SUFFIXES and p.name != TITLES_FILE
    )
    if not files:
        raise RecsysInputError(f"{path}: no log files (.csv, .parquet, .ndjson) in the folder")
    return files


def ingest_paths(ws: Workspace, paths: list[Path], layout: LogLayout) -> IngestReport:
    """`recsys ingest`: log files, and folders read as `--dataset` reads one (titles too)."""
    titles = [t for path in paths if (t := folder_titles(path)) is not None]  # refused first
    files = [f for path in paths for f in (dataset_files(path) if path.is_dir() else [path])]
    report = ingest_recorded(ws, files, layout)
    for frame in titles:
        vocab.save_item_titles(ws, frame)
    return report


def folder_titles(path: Path) -> pl.DataFrame | None:
    """A dataset folder's `items.csv` titles (read as `recsys ingest-items` reads them), if any."""
    items = path / TITLES_FILE
    if not (path.is_dir() and items.is_file()):
        return None
    return vocab.read_item_titles(items, "csv", "item_id", "title").titles


def datasets_root() -> Path | None:
    """Where dataset names are looked up: `$RECSYS_DATASETS` (None when it is not set)."""
    root = os.environ.get(DATASETS_ENV_VAR)
    return Path(root) if root else None


def _dataset_path(dataset: str) -> Path:
    """A log file or folder given by path, or by name under `datasets_root()`."""
    path = Path(dataset).expanduser()
    if path.exists():
        return path
    root = datasets_root()
    if root is None:
        raise RecsysInputError(
            f"--dataset {dataset}: no such file or folder; give a path, or set "
            f"{DATASETS_ENV_VAR} to the folder of the named datasets"
        )
    if "/" not in dataset and (root / dataset).exists():
        return root / dataset
    raise RecsysInputError(
        f"--dataset {dataset}: no such file or folder (nor a dataset name in {root})"
    )


def check_dataset(ws: Workspace, dataset: str | None) -> None:
    """Refuse bad `prepare_dataset` arguments before the home is touched.

    No dataset on a home without events, or a dataset path that is missing or holds no logs.

    Raises:
        RecsysInputError: as `prepare_dataset`, but for the mixing of synthetic and real events.

    """
    if dataset is None and not store.has_events(ws):
        raise RecsysInputError(
            f"{ws.root} has no events: ingest logs (`recsys ingest FILE`), or pass --dataset "
            "with a log file, folder or dataset name, or --dataset synthetic for a generated "
            "demo log"
        )
    if dataset is not None and dataset != "synthetic":
        dataset_files(_dataset_path(dataset))


def prepare_dataset(ws: Workspace, dataset: str | None, layout: LogLayout = DEFAULT_LAYOUT) -> str:
    """Make sure the home has events; return the dataset's name for the manifest.

    Synthetic demo events and real ones never share a home (`data.ingest` refuses to add real
    logs to a demo home; `_synthetic_demo` refuses to add the demo to a home with events).

    Args:
        ws: The home.
        dataset: None (the home's events), "synthetic" (the generated demo log), a log file /
            folder, or a folder's name under `datasets_root()` (ingested once; a folder's
            `items.csv` gives titles).
        layout: The logs' format and column names.

    Raises:
        RecsysInputError: no dataset and no events; the path does not exist or holds no logs;
            the dataset would mix synthetic and real events.

    """
    check_dataset(ws, dataset)
    if dataset is None:
        return "synthetic" if holds_synthetic_demo(ws) else "workspace"
    if dataset == "synthetic":
        return _synthetic_demo(ws)
    path = _dataset_path(dataset)
    titles = folder_titles(path)  # a bad titles file is refused before any event is stored
    ingest_once(ws, dataset_files(path), layout=layout)
    if titles is not None:
        vocab.save_item_titles(ws, titles)
    return path.stem if path.is_file() else path.name


def _synthetic_demo(ws: Workspace) -> str:
    """Generate and ingest the demo log into a home with no events (once); "synthetic"."""
    name = "events-{users}-{items}-{events}.csv".format(**DEFAULT_SYNTHETIC)
    synth = ws.root / "synthetic" / name
    if holds_synthetic_demo(ws):
        return "synthetic"
    with store.writer_lock(ws):  # no event committed between the check and the record
        if _demo_ingest_was_cut_short(ws, synth):  # killed between the commit and its record
            record_ingested(ws, {fingerprint(synth): SYNTHETIC_SOURCE})
            return "synthetic"
    refuse_demo_into_events(ws)  # and again under the writer lock, at the commit
    if not synth.exists():
        synth.parent.mkdir(parents=True, exist_ok=True)
        spec = DEFAULT_SYNTHETIC
        frame = generate_events(spec["users"], spec["items"], spec["events"], seed=0)
        write_events(frame, str(synth))
    ingest_once(ws, [synth], source=SYNTHETIC_SOURCE)
    return "synthetic"


def _demo_ingest_was_cut_short(ws: Workspace, synth: Path) -> bool:
    """The store holds exactly the home's demo log, and no file's ingest was recorded."""
    if not synth.is_file() or not store.has_events(ws) or ingested_sources(ws):
        return False
    columns = ["user_id", "item_id", "timestamp"]
    stored = store.read_events(ws).select(columns).collect()
    types = {"user_id": pl.String, "item_id": pl.String, "timestamp": pl.Int64}
    demo = pl.read_csv(synth, schema_overrides=types).select(columns)
    return stored.height == demo.height and stored.sort(columns).equals(demo.sort(columns))
