"""HistoryStore: new parts merged in equal a fresh read of the whole store, whatever their order."""

from __future__ import annotations

import random

from data.ingest import ingest_rows
from data.store import part_paths
from data.workspace import Workspace
from serving.history import HistoryStore


def snapshot(store: HistoryStore, users: list[str]) -> dict[str, tuple[str, ...] | None]:
    return {u: (tuple(h) if (h := store.get(u)) is not None else None) for u in users}


def test_record_stores_and_merges_before_returning(ws: Workspace) -> None:
    store = HistoryStore(ws)
    store.refresh_if_changed()
    report, rejected = store.record([("u1", "a", 10), ("u1", "", 11), ("u1", "b", 5)], "test")
    assert (report.accepted, rejected["reason"].to_list()) == (2, ["empty item_id"])
    assert store.get("u1") == ("b", "a")  # time order, the bad row left out
    store.record([("u1", "c", 10), ("u2", "a", 1)], "test")  # a tie goes after (arrival)
    assert store.get("u1") == ("b", "a", "c") and store.get("u2") == ("a",)
    assert not store.refresh_if_changed()  # record already took the new part in


def test_merged_batches_equal_a_fresh_read(ws: Workspace) -> None:
    """Batches in and out of time order, ties, users old and new: same as reading it all."""
    rng = random.Random(0)
    users = [f"u{k}" for k in range(12)]
    live = HistoryStore(ws, max_kept=4)
    for batch in range(15):
        rows = [
            (rng.choice(users), f"i{rng.randrange(30)}", rng.randrange(100))
            for _ in range(rng.randrange(1, 10))
        ]
        live.record(rows, f"batch {batch}")
        fresh = HistoryStore(ws, max_kept=4)
        assert fresh.refresh_if_changed()
        assert snapshot(live, users) == snapshot(fresh, users), f"after batch {batch}"
    assert len(live) == len([u for u in users if live.get(u) is not None])


def test_a_part_that_vanishes_rebuilds(ws: Workspace) -> None:
    store = HistoryStore(ws)
    store.record([("u1", "a", 1)], "test")
    store.record([("u2", "b", 2)], "test")
    first = min(part_paths(ws), key=lambda p: p.stat().st_mtime_ns)
    first.unlink()
    assert store.refresh_if_changed()
    assert store.get("u1") is None and store.get("u2") == ("b",)


def test_an_emptied_event_store_empties_the_histories(ws: Workspace) -> None:
    store = HistoryStore(ws)
    store.record([("u1", "a", 1)], "test")
    for part in part_paths(ws):
        part.unlink()
    assert store.refresh_if_changed()  # was: polars refused to scan no files, every poll
    assert store.get("u1") is None and len(store) == 0
    assert not store.refresh_if_changed()


def test_ingests_from_elsewhere_are_picked_up_by_refresh(ws: Workspace) -> None:
    store = HistoryStore(ws)
    assert not store.refresh_if_changed()  # no events folder yet: nothing to read
    ingest_rows(ws, [("u1", "a", 1)])  # another process (the CLI) writes a part
    assert store.get("u1") is None
    assert store.refresh_if_changed() and store.get("u1") == ("a",)
