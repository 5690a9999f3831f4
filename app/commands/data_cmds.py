"""`recsys ingest`, `recsys ingest-items` and `recsys synth`: getting events into the workspace."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Literal

import typer

from app.cli_common import HomeOption, JsonOption, emit_json, require_writable, workspace
from data.datasets import ingest_paths
from data.errors import RecsysInputError
from data.formats import check_file, detect_format
from data.ingest import LogLayout
from data.synth import DEFAULT_SYNTHETIC, generate_events, write_events
from data.vocab import read_item_titles, save_item_titles

log = logging.getLogger("recsys.data")

LogFormat = Literal["csv", "parquet", "ndjson"]  # data.formats.FORMATS (a test holds them equal)
FormatOption = Annotated[
    LogFormat | None,
    typer.Option(
        "--format", help="Format of every file.", show_default="from each file's extension"
    ),
]
UserColOption = Annotated[
    str, typer.Option("--user-col", metavar="<column>", help="User id column of the logs.")
]
ItemColOption = Annotated[
    str, typer.Option("--item-col", metavar="<column>", help="Item id column of the logs.")
]
TimeColOption = Annotated[
    str,
    typer.Option(
        "--time-col",
        metavar="<column>",
        help="Timestamp column of the logs: Unix seconds or ISO-8601.",
    ),
]


def ingest(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Event log files (csv, parquet, ndjson) or folders, read as `train --dataset` "
            "reads one: its interactions.csv, else its log files, and its items.csv titles."
        ),
    ],
    home: HomeOption = None,
    fmt: FormatOption = None,
    user_col: UserColOption = "user_id",
    item_col: ItemColOption = "item_id",
    time_col: TimeColOption = "timestamp",
    as_json: JsonOption = False,
) -> None:
    """Validate event logs and append the good rows to the event store (bad rows to rejects/).

    Each file's contents are recorded, so a later `train --dataset` or `retrain --logs` of the
    same file does not read it again.
    """
    ws = workspace(home)
    report = ingest_paths(ws, paths, LogLayout(fmt, user_col, item_col, time_col))
    if as_json:
        emit_json(report.to_dict())
        return
    rejects = f" (see {report.rejects_path})" if report.rejects_path else ""
    sys.stdout.write(
        f"ingest {report.ingest_id}: {report.accepted} accepted, {report.rejected} rejected"
        f"{rejects}; store: {report.events_total} events, {report.users_total} users, "
        f"{report.items_total} items\n"
    )


def ingest_items(
    path: Annotated[Path, typer.Argument(help="Item metadata file (csv, parquet, ndjson).")],
    home: HomeOption = None,
    fmt: FormatOption = None,
    id_col: Annotated[
        str, typer.Option("--id-col", metavar="<column>", help="Item id column.")
    ] = "item_id",
    title_col: Annotated[
        str, typer.Option("--title-col", metavar="<column>", help="Title column.")
    ] = "title",
    as_json: JsonOption = False,
) -> None:
    """Store item titles (vocab/item_meta.parquet) for display in recommendations."""
    ws = workspace(home)
    check_file(path)  # "no such file" says more than "cannot tell the format"
    read = read_item_titles(path, detect_format(path, fmt), id_col, title_col)
    total = save_item_titles(ws, read.titles)
    if as_json:
        rows = read.titles.height + read.blank + read.repeated
        emit_json(
            {"read": rows, "stored": read.titles.height, "blank": read.blank,
             "repeated": read.repeated, "titles_total": total}
        )  # fmt: skip
        return
    sys.stdout.write(
        f"stored the titles of {read.titles.height} items ({read.blank} rows without an id or a "
        f"title skipped, {read.repeated} repeating an earlier id: the last kept); the home "
        f"holds titles for {total} items\n"
    )


def synth(
    out: Annotated[
        Path, typer.Option("--out", metavar="<file>", help="Output file: .csv or .parquet.")
    ],
    users: Annotated[
        int, typer.Option("--users", min=1, metavar="<int>", help="Number of users.")
    ] = DEFAULT_SYNTHETIC["users"],
    items: Annotated[
        int,
        typer.Option("--items", min=1, metavar="<int>", help="Catalogue size (number of items)."),
    ] = DEFAULT_SYNTHETIC["items"],
    events: Annotated[
        int,
        typer.Option("--events", min=0, metavar="<int>", help="Number of events (rows) to write."),
    ] = DEFAULT_SYNTHETIC["events"],
    seed: Annotated[
        int,
        typer.Option(
            "--seed", min=0, metavar="<int>", help="Random seed: the same seed writes the same log."
        ),
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Write a synthetic log with planted sequential structure (docs/reference/data-formats.md)."""
    if out.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise RecsysInputError(f"{out}: --out must end in .csv or .parquet")
    if out.parent and not out.parent.is_dir():
        raise RecsysInputError(f"{out}: directory {out.parent} does not exist")
    require_writable({"--out": out})
    started = time.perf_counter()
    frame = generate_events(users, items, events, seed)
    write_events(frame, str(out))
    seconds = round(time.perf_counter() - started, 3)
    log.info("wrote %d events to %s in %.1f s", frame.height, out, seconds)
    written = frame["user_id"].n_unique()  # fewer than asked when there are fewer events
    payload = {"path": str(out), "users": written, "items": items, "events": frame.height}
    if as_json:
        emit_json({**payload, "seed": seed, "seconds": seconds})
    else:
        sys.stdout.write(f"wrote {frame.height} events ({written} users, {items} items) to {out}\n")


def register(app: typer.Typer) -> None:
    """Attach the data commands."""
    app.command("ingest")(ingest)
    app.command("ingest-items")(ingest_items)
    app.command("synth")(synth)
