"""Known users' histories for serving, read from the event store and kept in memory.

`refresh_if_changed` compares the committed event parts (names and sizes) with those already
read. New parts are read alone and merged in: a user whose new events are all at or after
their newest stored one gets them appended (ties go after, as `event_seq` only grows); a user
whose new events reach back in time has their history re-read from the parts. A part that
vanished or changed size rebuilds everything, off to the side, swapped in by one assignment.

`record` ingests rows (`data.ingest.ingest_rows`: validation, one atomic part) and then
refreshes, so a known user's next request to this process sees the events `POST /events` just
stored (another process merges them at its next refresh: a poll, a reload or its own record).

Writers (the poller, `record`) take one lock; readers (`get`, on the model thread) never do:
each user's history is one immutable tuple, replaced by a single dict assignment.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence

import polars as pl

from data.formats import RawRow
from data.ingest import IngestReport, ingest_rows
from data.store import PART_GLOB
from data.workspace import Workspace

log = logging.getLogger(__name__)

MAX_KEPT = 1000  # per user: enough for the tower (L items) and for excluding what was seen

Histories = dict[str, tuple[str, ...]]
Newest = dict[str, int]  # user_id -> timestamp of their newest stored event


class HistoryStore:
    """user_id -> item_ids (oldest first, at most MAX_KEPT, ordered by timestamp, event_seq)."""

    def __init__(self, ws: Workspace, max_kept: int = MAX_KEPT) -> None:
        """Prepare a store over `ws`; nothing is read until `refresh_if_changed`."""
        self.ws = ws
        self.max_kept = max_kept
        self._histories: Histories = {}
        self._newest: Newest = {}
        self._parts: dict[str, int] = {}  # name -> size of every part merged in
        self._lock = threading.Lock()  # one writer at a time; readers never take it

    def get(self, user_id: str) -> Sequence[str] | None:
        """The user's history, or None for a user the store has never seen."""
        return self._histories.get(user_id)

    def __len__(self) -> int:
        return len(self._histories)

    def sample(self, n: int, seed: int = 0) -> list[Sequence[str]]:
        """Up to `n` users' histories, drawn without replacement (the same for a seed and store)."""
        histories = self._histories
        users = random.Random(seed).sample(sorted(histories), min(n, len(histories)))
        return [histories[user] for user in users]

    def record(self, rows: Sequence[RawRow], source: str) -> tuple[IngestReport, pl.DataFrame]:
        """Ingest `rows` as one part (see `data.ingest.ingest_rows`), then merge it in.

        A failed refresh is logged, not raised: the events are stored, and the next refresh
        (the model poller's) merges them.
        """
        report, rejected = ingest_rows(self.ws, rows, source)
        if report.accepted:
            try:
                self.refresh_if_changed()
            except Exception:
                log.exception("stored %s but could not refresh user histories", report.ingest_id)
        return report, rejected

    def _current_parts(self) -> dict[str, int]:
        if not self.ws.events_dir.is_dir():
            return {}
        parts = sorted(self.ws.events_dir.glob(PART_GLOB))
        return {p.name: p.stat().st_size for p in parts}

    def refresh_if_changed(self) -> bool:
        """Merge new event parts in (or rebuild). Returns True when anything changed."""
        with self._lock:
            parts = self._current_parts()
            if parts == self._parts:
                return False
            if self._parts and all(parts.get(n) == s for n, s in self._parts.items()):
                added = [n for n in parts if n not in self._parts]
                self._merge(self._histories, self._newest, self._scan(added).collect(), parts)
            else:  # parts changed or vanished: rebuild (no parts left: no histories)
                histories: Histories = {}
                newest: Newest = {}
                if parts:
                    self._merge(histories, newest, self._scan(list(parts)).collect(), parts)
                self._histories, self._newest = histories, newest
            self._parts = parts
        log.info("history store: %d users, %d parts", len(self._histories), len(parts))
        return True

    def _scan(self, names: list[str]) -> pl.LazyFrame:
        paths = [self.ws.events_dir / n for n in names]
        return pl.scan_parquet(paths).select("user_id", "item_id", "timestamp", "event_seq")

    def _merge(
        self, histories: Histories, newest: Newest, events: pl.DataFrame, parts: dict[str, int]
    ) -> None:
        """Put `events` into the maps; users whose new events reach back are re-read."""
        reread = []
        for user, items, first, last in _per_user(events, self.max_kept).iter_rows():
            old = histories.get(user)
            if old is None or first >= newest[user]:
                histories[user] = (*(old or ()), *items)[-self.max_kept :]
                newest[user] = last
            else:
                reread.append(user)
        if reread:
            users = pl.Series(reread, dtype=pl.String).implode()
            every = self._scan(list(parts)).filter(pl.col("user_id").is_in(users)).collect()
            for user, items, _, last in _per_user(every, self.max_kept).iter_rows():
                histories[user], newest[user] = tuple(items), last


def _per_user(events: pl.DataFrame, max_kept: int) -> pl.DataFrame:
    """user_id, item_ids (time order, the newest `max_kept`), first and last timestamp."""
    return (
        events.sort("user_id", "timestamp", "event_seq")
        .group_by("user_id", maintain_order=True)
        .agg(
            pl.col("item_id").tail(max_kept),
            pl.col("timestamp").min().alias("first"),
            pl.col("timestamp").max().alias("last"),
        )
    )
