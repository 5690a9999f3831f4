"""Train / validation / test splits of the stored events as per-user item_idx sequences.

A user's sequence is their events ordered by (timestamp, event_seq): time first, arrival order
for ties (the Amazon sets store positions as timestamps, so ties never happen there).

Leave-one-out (`method="loo"`, the protocol of the published results): a user with n >= 3
events gives train = seq[:-2], val = (history seq[:-2], target seq[-2]) and
test = (history seq[:-1], target seq[-1]). Users with fewer than 3 events are in train only,
with their whole sequence.

Global time cut (`method="time"`, `cutoff=T`): nothing at or after T ever reaches train or val.
With P the user's events before T and Q those at or after T:
- test = (history P, target Q[0]) for users with both (the first thing they did after the cut,
  predicted from everything before it; users with no history before T cannot be queried);
- val = (history P[:-1], target P[-1]) for users with len(P) >= 2, i.e. leave-one-out on the
  pre-cut part, and then train = P[:-1]; users with len(P) == 1 keep train = P.

Since (`since=T`): only events at or after T are split (a retrain on a long log's recent part).

k-core (`kcore=k > 0`): before splitting, users and items with fewer than k events are dropped,
repeatedly, until every remaining user and item has at least k events.

Shard (`shard=(s, S)`): only the users with user_idx % S == s, read lazily from the event parts
(a rank of a data-parallel training holds its own users' events, not the whole store). A
user's splits do not depend on other users, so the S shards partition the unsharded splits;
the train interaction counts of every shard are summed into `Splits.train_counts` (popularity
comes from the whole log), one shard in memory at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from data.errors import RecsysInputError
from data.store import part_path, part_paths, read_events
from data.vocab import load_item_vocab, load_user_vocab
from data.workspace import Workspace

TRAIN_SCHEMA = {"user_idx": pl.Int64(), "items": pl.List(pl.Int64())}
EVAL_SCHEMA = {"user_idx": pl.Int64(), "history": pl.List(pl.Int64()), "target": pl.Int64()}


@dataclass(frozen=True)
class Splits:
    """Per-user sequences of item_idx (1-based; 0 is never used, it is padding).

    Attributes:
        train: `user_idx: i64, items: list[i64]`, each user's training sequence in order.
        val: `user_idx: i64, history: list[i64], target: i64`.
        test: Same columns as `val`.
        num_items: Size of the item vocabulary; item_idx ranges over 1..num_items.
        parts: Names of the event parts split (what a model trained on them saw).
        shard: (s, S): these are the users with user_idx % S == s; (0, 1) is everyone.
        train_counts: int64 `[num_items + 1]` train interactions per item_idx over every
            shard; None when unsharded (count `train` itself).

    """

    train: pl.DataFrame
    val: pl.DataFrame
    test: pl.DataFrame
    num_items: int
    parts: tuple[str, ...] = ()
    shard: tuple[int, int] = (0, 1)
    train_counts: np.ndarray | None = None


def indexed_events(
    ws: Workspace,
    item_vocab: pl.DataFrame,
    parts: list[Path] | None = None,
    shard: tuple[int, int] = (0, 1),
) -> pl.DataFrame:
    """Stored events with vocabulary indices: `user_idx, item_idx, timestamp, event_seq`.

    Items come from `item_vocab`, the one read the caller sizes the catalogue with: an ingest
    that commits new items meanwhile cannot give an item_idx beyond it. Its events on those
    new items are left out; its events on known items may be in (events and the user vocab
    are read later), so a split taken during an ingest can hold part of it, unless `parts`
    names the parts to read (default: every committed part). `shard` (s, S): only the users
    with user_idx % S == s (the join drops the other users' rows as the parts stream by).
    """
    items = item_vocab.lazy().select("item_id", "item_idx")
    users = load_user_vocab(ws).lazy().select("user_id", "user_idx")
    index, count = shard
    if count > 1:
        users = users.filter(pl.col("user_idx") % count == index)
    return (
        read_events(ws, parts)
        .join(users, on="user_id")
        .join(items, on="item_id")
        .select("user_idx", "item_idx", "timestamp", "event_seq")
        .collect(engine="streaming")
    )


def kcore_filter(events: pl.DataFrame, k: int) -> pl.DataFrame:
    """Drop users and items with fewer than `k` events, repeatedly, until none is left.

    Args:
        events: Rows with `user_idx` and `item_idx`.
        k: The core size; k <= 1 returns `events` unchanged.

    """
    if k <= 1:
        return events
    while True:
        before = events.height
        events = events.filter(pl.len().over("user_idx") >= k)
        events = events.filter(pl.len().over("item_idx") >= k)
        if events.height == before:
            return events


def sequences(events: pl.DataFrame) -> pl.DataFrame:
    """`user_idx, items: list[i64]` ordered by (timestamp, event_seq) within each user."""
    # Sorting inside each group is much cheaper than one global sort of all events.
    ordered = pl.col("item_idx").sort_by("timestamp", "event_seq")
    return events.group_by("user_idx").agg(ordered.alias("items")).sort("user_idx")


def _eval_rows(seqs: pl.DataFrame, history: pl.Expr, target: pl.Expr) -> pl.DataFrame:
    return seqs.select(
        "user_idx", history.alias("history"), target.cast(pl.Int64).alias("target")
    ).cast(EVAL_SCHEMA)  # type: ignore[arg-type]


def loo_split(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Leave-one-out train, val and test (see module docstring)."""
    seqs = sequences(events)
    n = pl.col("items").list.len()
    items = pl.col("items")
    train = seqs.select(
        "user_idx", pl.when(n >= 3).then(items.list.slice(0, n - 2)).otherwise(items).alias("items")
    )
    long = seqs.filter(n >= 3)
    val = _eval_rows(long, items.list.slice(0, n - 2), items.list.get(-2))
    test = _eval_rows(long, items.list.slice(0, n - 1), items.list.get(-1))
    return train.cast(TRAIN_SCHEMA), val, test  # type: ignore[arg-type]


def time_split(
    events: pl.DataFrame, cutoff: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Global time cut at `cutoff` (Unix seconds): train, val, test (see module docstring)."""
    before = sequences(events.filter(pl.col("timestamp") < cutoff))
    first_after = (
        events.filter(pl.col("timestamp") >= cutoff)
        .group_by("user_idx")
        .agg(pl.col("item_idx").sort_by("timestamp", "event_seq").first().alias("target"))
    )
    n = pl.col("items").list.len()
    items = pl.col("items")
    train = before.select(
        "user_idx", pl.when(n >= 2).then(items.list.slice(0, n - 1)).otherwise(items).alias("items")
    )
    val = _eval_rows(before.filter(n >= 2), items.list.slice(0, n - 1), items.list.get(-1))
    test = _eval_rows(before.join(first_after, on="user_idx"), items, pl.col("target"))
    return train.cast(TRAIN_SCHEMA), val, test.sort("user_idx")  # type: ignore[arg-type]


def build_splits(
    ws: Workspace,
    method: Literal["loo", "time"] = "loo",
    cutoff: int | None = None,
    kcore: int = 0,
    since: int | None = None,
    shard: tuple[int, int] = (0, 1),
    parts: tuple[str, ...] | None = None,
    count_every_shard: bool = True,
) -> Splits:
    """Split the stored events into train / val / test sequences.

    Args:
        ws: The workspace whose events are split.
        method: "loo" (leave-one-out) or "time" (global cut at `cutoff`).
        cutoff: Unix seconds; required for "time", ignored for "loo".
        kcore: Iterative k-core filter applied before splitting; 0 disables it.
        since: Unix seconds: split only the events at or after it (None: all).
        shard: (s, S): split only the users with user_idx % S == s (see the module docstring).
        parts: Names of the event parts to read (`Splits.parts` of an earlier split; default:
            every part committed now).
        count_every_shard: For a shard, read the other shards for `Splits.train_counts`
            (False: only this shard's rows are needed, e.g. to evaluate it; counts None).

    Raises:
        RecsysInputError: no events, unknown method, "time" without cutoff, a k-core that
            leaves nothing or one asked of a shard, or a bad shard.

    """
    if method not in ("loo", "time"):
        raise RecsysInputError(f"unknown split method {method!r} (expected 'loo' or 'time')")
    if method == "time" and cutoff is None:
        raise RecsysInputError("split 'time' needs a cutoff (Unix seconds)")
    index, count = shard
    if not 0 <= index < count:
        raise RecsysInputError(f"shard {index} of {count} does not exist")
    if count > 1 and kcore > 0:
        raise RecsysInputError(
            "data.kcore counts every user's events: it cannot filter one shard of the users "
            "(set data.kcore=0 or data.shard_by_rank=false)"
        )
    # the events read are exactly these parts, whatever comes later
    paths = part_paths(ws) if parts is None else [part_path(ws, name) for name in parts]
    item_vocab = load_item_vocab(ws)
    read = _ShardReader(ws, item_vocab, paths, method, cutoff, kcore, since)
    train, val, test = read(shard)
    counts = read.train_counts(shard, train) if count > 1 and count_every_shard else None
    names = tuple(p.stem.removeprefix("part-") for p in paths)
    return Splits(train, val, test, item_vocab.height, names, shard, counts)


@dataclass(frozen=True)
class _ShardReader:
    """The splits of one shard of the users, all read from the same parts and vocabulary."""

    ws: Workspace
    item_vocab: pl.DataFrame
    parts: list[Path]
    method: str
    cutoff: int | None
    kcore: int
    since: int | None

    def __call__(self, shard: tuple[int, int]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """(train, val, test) of the users in `shard`.

        Raises:
            RecsysInputError: unsharded, when a step leaves nothing (a shard may be empty:
                `train_counts` checks the shards together).

        """
        whole = shard[1] == 1

        def require(rows: int, problem: str) -> None:
            if whole and rows == 0:
                raise RecsysInputError(problem)

        events = indexed_events(self.ws, self.item_vocab, self.parts, shard)
        require(
            events.height, f"no events in the workspace {self.ws.root}; run `recsys ingest` first"
        )
        if self.since is not None:
            events = events.filter(pl.col("timestamp") >= self.since)
            require(events.height, f"no events at or after --since {self.since}")
        events = kcore_filter(events, self.kcore)
        require(events.height, f"the {self.kcore}-core filter removed every event")
        if self.method == "loo":
            train, val, test = loo_split(events)
        else:
            assert self.cutoff is not None
            train, val, test = time_split(events, self.cutoff)
        require(train.height, f"no events before the cutoff {self.cutoff}: nothing to train on")
        return train, val, test

    def train_counts(self, shard: tuple[int, int], own: pl.DataFrame) -> np.ndarray:
        """int64 `[n + 1]` train interactions per item over every shard (`own`: this one's train).

        Raises:
            RecsysInputError: no shard has anything to train on.

        """
        index, count = shard
        counts = np.zeros(self.item_vocab.height + 1, dtype=np.int64)
        for other in range(count):
            train = own if other == index else self((other, count))[0]
            flat = train["items"].explode().drop_nulls().to_numpy()
            counts += np.bincount(flat, minlength=len(counts))[: len(counts)]
        if counts.sum() == 0:
            raise RecsysInputError(f"no events in the workspace {self.ws.root} to train on")
        counts[0] = 0
        return counts
