"""`ingest_rows`: in-memory rows through the file ingest's validation, as one atomic part."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest

from data.errors import RecsysInputError
from data.ingest import HTTP_SOURCE, ingest_files, ingest_rows
from data.store import part_paths, read_events
from data.validate import DUP_INPUT, DUP_STORED
from data.vocab import load_item_vocab, load_user_vocab
from data.workspace import Workspace


def events_of(ws: Workspace) -> list[tuple[str, str, int, int]]:
    return [tuple(r) for r in read_events(ws).sort("event_seq").collect().iter_rows()]


def test_good_rows_become_one_part_with_vocab(ws: Workspace) -> None:
    report, rejected = ingest_rows(ws, [(" u1 ", "a", 10), ("u2", "b", "1970-01-01T00:00:20Z")])
    assert (report.accepted, report.rejected, report.events_total) == (2, 0, 2)
    assert rejected.height == 0 and report.rejects_path is None
    assert [p.name for p in part_paths(ws)] == [f"part-{report.ingest_id}.parquet"]
    assert events_of(ws) == [("u1", "a", 10, 0), ("u2", "b", 20, 1)]
    assert load_user_vocab(ws)["user_id"].to_list() == ["u1", "u2"]
    assert load_item_vocab(ws)["item_idx"].to_list() == [1, 2]


def test_bad_rows_get_the_file_ingest_reasons_and_good_rows_are_kept(ws: Workspace) -> None:
    rows = [
        ("u1", "a", 10),
        (None, "a", 10),
        ("u1", "  ", 10),
        ("u" * 257, "a", 10),
        ("u1", "b", None),
        ("u1", "b", "yesterday"),
        ("u1", "b", "12.5"),
        ("u1", "a", 10),
        ("u1", "c", "1700000000"),
    ]
    report, rejected = ingest_rows(ws, rows)
    assert (report.accepted, report.rejected) == (2, 7)
    assert rejected["row"].to_list() == [2, 3, 4, 5, 6, 7, 8]
    assert rejected["reason"].to_list() == [
        "null user_id",
        "empty item_id",
        "user_id longer than 256 characters",
        "missing timestamp",
        "unparseable timestamp",
        "unparseable timestamp",
        DUP_INPUT,
    ]
    assert set(rejected["source"]) == {HTTP_SOURCE}
    assert report.rejects_path is not None
    assert pl.read_parquet(report.rejects_path).equals(rejected)
    assert events_of(ws) == [("u1", "a", 10, 0), ("u1", "c", 1700000000, 1)]


def test_rows_already_stored_by_a_file_ingest_are_duplicates(ws: Workspace, tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("user_id,item_id,timestamp\nu1,a,10\n")
    ingest_files(ws, [log])
    report, rejected = ingest_rows(ws, [("u1", "a", 10), ("u1", "b", 11)])
    assert rejected["reason"].to_list() == [DUP_STORED]
    assert events_of(ws) == [("u1", "a", 10, 0), ("u1", "b", 11, 1)]
    assert report.events_total == 2


def test_all_rejected_writes_no_part(ws: Workspace) -> None:
    report, rejected = ingest_rows(ws, [("u1", "", 1)])
    assert (report.accepted, report.rejected, rejected.height) == (0, 1, 1)
    assert part_paths(ws) == [] and load_user_vocab(ws).height == 0


def test_demo_home_is_refused_before_anything_is_written(ws: Workspace) -> None:
    ingest_rows(ws, [("u1", "a", 1)])
    (ws.root / "ingested.json").write_text('{"abc": "synthetic"}')
    with pytest.raises(RecsysInputError, match="synthetic demo events"):
        ingest_rows(ws, [("u2", "b", 2)])
    assert len(part_paths(ws)) == 1


def test_concurrent_ingests_serialise_on_the_writer_lock(ws: Workspace) -> None:
    """Eight threads at once: every event stored once, event_seq gapless, vocab consistent."""
    batches = [[(f"u{t}", f"i{t}-{k}", k) for k in range(50)] for t in range(8)]
    errors: list[BaseException] = []

    def run(rows: list[tuple[str, str, int]]) -> None:
        try:
            ingest_rows(ws, rows)
        except BaseException as err:  # a thread cannot fail the test: collected, asserted below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stored = read_events(ws).collect()
    assert len(part_paths(ws)) == 8
    assert sorted(stored["event_seq"].to_list()) == list(range(400))
    items = load_item_vocab(ws)
    assert items.height == 400 and items["item_idx"].to_list() == list(range(1, 401))
    assert int(pl.read_parquet(ws.items_vocab_path)["count"].sum()) == 400  # saved, not rebuilt
    assert sorted(load_user_vocab(ws)["user_id"]) == [f"u{t}" for t in range(8)]
