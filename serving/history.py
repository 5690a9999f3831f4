"""Known users' histories for serving, read from the event store and kept in memory.

The store (`data.store.read_events`) is scanned once into a user_id -> item_ids map, off the
request path; `refresh_if_changed` rebuilds it when the set of event parts changes (a new
ingest) and swaps it in with one reference assignment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from data.workspace import Workspace

log = logging.getLogger(__name__)

MAX_KEPT = 1000  # per user: enough for the tower (L items) and for excluding what was seen


class HistoryStore:
    """user_id -> item_ids (oldest first, at most MAX_KEPT, ordered by timestamp, event_seq)."""

    def __init__(self, ws: Workspace, max_kept: int = MAX_KEPT) -> None:
        """Prepare a store over `ws`; nothing is read until `refresh_if_changed`."""
        self.ws = ws
        self.max_kept = max_kept
        self._histories: dict[str, tuple[str, ...]] = {}
        self._signature: tuple[tuple[str, int], ...] | None = None

    def get(self, user_id: str) -> Sequence[str] | None:
        """The user's history, or None for a user the store has never seen."""
        return self._histories.get(user_id)

    def __len__(self) -> int:
        return len(self._histories)

    def _current_signature(self) -> tuple[tuple[str, int], ...]:
        if not self.ws.events_dir.is_dir():
            return ()
        parts = sorted(self.ws.events_dir.glob("part-*.parquet"))
        return tuple((p.name, p.stat().st_size) for p in parts)

    def refresh_if_changed(self) -> bool:
        """Reload when event parts were added or changed. Returns True when it reloaded."""
        signature = self._current_signature()
        if signature == self._signature:
            return False
        self._histories = self._read() if signature else {}
        self._signature = signature
        log.info("history store: %d users", len(self._histories))
        return True

    def _read(self) -> dict[str, tuple[str, ...]]:
        import polars as pl

        try:
            from data.store import read_events
        except ImportError:
            log.warning("data.store is not available: known users have no history")
            return {}
        grouped = (
            read_events(self.ws)
            .sort("user_id", "timestamp", "event_seq")
            .group_by("user_id", maintain_order=True)
            .agg(pl.col("item_id").tail(self.max_kept))
            .collect()
        )
        users = grouped["user_id"].to_list()
        items = grouped["item_id"].to_list()
        return {u: tuple(h) for u, h in zip(users, items, strict=True)}
