"""Item and user vocabularies: external string id <-> 1-based integer index, append-only.

`vocab/items.parquet` holds `item_id, item_idx, first_seen, count`; `vocab/users.parquet` the
same with `user_id, user_idx`. Index 0 is padding and never assigned. Indices are given in
order of first arrival (`event_seq`), and an id keeps its index forever: a later ingest only
appends new ids after the current maximum and adds to counts. `first_seen` is the smallest
timestamp seen for the id, `count` its number of stored events.

Because the indices follow arrival order, the vocabulary is a pure function of the event store.
That makes it self-repairing: if a crash lands between committing an event part and rewriting
the vocabulary, `sum(count)` no longer equals the number of stored events and the loaders
rebuild it from the events, giving exactly the indices an uninterrupted ingest would have.

Optional item metadata (`vocab/item_meta.parquet`: `item_id, title`) comes from
`recsys ingest-items` (or a dataset folder's `items.csv`): `read_item_titles` reads such a
file, `save_item_titles` merges it into the home's.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import polars as pl

from data.errors import RecsysInputError
from data.formats import id_text, scan_file
from data.store import count_events, read_events, write_parquet_atomic, writer_lock
from data.workspace import Workspace

_KINDS = {"item": "items_vocab_path", "user": "users_vocab_path"}


def vocab_schema(kind: str) -> dict[str, pl.DataType]:
    """Schema of the `kind` ("item" or "user") vocabulary."""
    return {
        f"{kind}_id": pl.String(),
        f"{kind}_idx": pl.Int64(),
        "first_seen": pl.Int64(),
        "count": pl.Int64(),
    }


def item_meta_path(ws: Workspace) -> Path:
    """Where the optional item metadata (titles) lives."""
    return ws.vocab_dir / "item_meta.parquet"


def _path(ws: Workspace, kind: str) -> Path:
    return getattr(ws, _KINDS[kind])


def extend_vocab(vocab: pl.DataFrame, events: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Add the events' ids to `vocab`: known ids keep their index, new ids are appended.

    Args:
        vocab: The current vocabulary (`vocab_schema(kind)`), possibly empty.
        events: New events with `<kind>_id, timestamp, event_seq`.
        kind: "item" or "user".

    Returns:
        The new vocabulary sorted by index; new ids numbered from `max(idx) + 1` in order of
        their first `event_seq`.

    """
    key, idx = f"{kind}_id", f"{kind}_idx"
    stats = (
        events.lazy()
        .group_by(key)
        .agg(
            pl.col("event_seq").min().alias("_first_seq"),
            pl.col("timestamp").min().alias("_first_seen"),
            pl.len().cast(pl.Int64).alias("_count"),
        )
        .collect(engine="streaming")  # measurably less CPU than in-memory for 10M rows
    )
    merged = vocab.join(stats, on=key, how="left").select(
        key,
        idx,
        pl.min_horizontal("first_seen", "_first_seen").alias("first_seen"),
        (pl.col("count") + pl.col("_count").fill_null(0)).alias("count"),
    )
    start = int(vocab[idx].max() or 0) + 1  # type: ignore[arg-type]
    new = (
        stats.join(vocab.select(key), on=key, how="anti")
        .sort("_first_seq")
        .select(
            key,
            (pl.int_range(pl.len(), dtype=pl.Int64) + start).alias(idx),
            pl.col("_first_seen").alias("first_seen"),
            pl.col("_count").alias("count"),
        )
    )
    return pl.concat([merged, new]).sort(idx)


def _empty(kind: str) -> pl.DataFrame:
    return pl.DataFrame(schema=vocab_schema(kind))


def _rebuild(ws: Workspace, kind: str) -> pl.DataFrame:
    events = read_events(ws).select(f"{kind}_id", "timestamp", "event_seq").collect()
    return extend_vocab(_empty(kind), events, kind)


def load_vocab(ws: Workspace, kind: str) -> pl.DataFrame:
    """The `kind` vocabulary, consistent with the event store (rebuilt if stale or unreadable).

    Returns an empty frame with the right schema when nothing was ingested.
    """
    path = _path(ws, kind)
    total = count_events(ws)
    vocab = _read_if_intact(path)
    if vocab is not None and int(vocab["count"].sum()) == total:
        return vocab
    if total == 0:
        return _empty(kind)
    return _rebuild(ws, kind)


def _read_if_intact(path: Path) -> pl.DataFrame | None:
    """The vocabulary file, or None when it is missing or damaged (rebuilt like a stale one)."""
    if not path.exists():
        return None
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError):
        return None


def load_item_vocab(ws: Workspace) -> pl.DataFrame:
    """`item_id: str, item_idx: i64 (1-based), first_seen: i64, count: i64`, sorted by item_idx."""
    return load_vocab(ws, "item")


def load_user_vocab(ws: Workspace) -> pl.DataFrame:
    """`user_id: str, user_idx: i64 (1-based), first_seen: i64, count: i64`, sorted by user_idx."""
    return load_vocab(ws, "user")


def save_vocab(ws: Workspace, vocab: pl.DataFrame, kind: str) -> None:
    """Write the `kind` vocabulary atomically."""
    write_parquet_atomic(vocab, _path(ws, kind))


def update_vocabs(
    ws: Workspace, old: dict[str, pl.DataFrame], events: pl.DataFrame
) -> dict[str, int]:
    """After a part is committed: extend both vocabularies with its events and save them.

    Args:
        ws: The workspace.
        old: {"item": vocab, "user": vocab} as they were before the part was committed.
        events: The committed part (`user_id, item_id, timestamp, event_seq`).

    Returns:
        {"item": rows, "user": rows}: the sizes of the vocabularies saved.

    """
    sizes: dict[str, int] = {}
    for kind in _KINDS:
        table = extend_vocab(old[kind], events, kind)
        save_vocab(ws, table, kind)
        sizes[kind] = table.height
    return sizes


def load_item_titles(ws: Workspace) -> dict[str, str]:
    """item_id -> title from `recsys ingest-items`; empty when no metadata was ingested."""
    path = item_meta_path(ws)
    if not path.exists():
        return {}
    meta = pl.read_parquet(path).drop_nulls("title")
    return dict(zip(meta["item_id"].to_list(), meta["title"].to_list(), strict=True))


def save_item_titles(ws: Workspace, titles: pl.DataFrame) -> int:
    """Merge `item_id, title` rows into the stored metadata (new titles win); return the total."""
    path = item_meta_path(ws)
    with writer_lock(ws):
        if path.exists():
            old = pl.read_parquet(path).join(titles.select("item_id"), on="item_id", how="anti")
            titles = pl.concat([old, titles])
        titles = titles.unique("item_id", keep="last", maintain_order=True).sort("item_id")
        write_parquet_atomic(titles, path)
    return titles.height


def read_item_titles(path: Path, fmt: str, id_col: str, title_col: str) -> TitlesRead:
    """`item_id, title` from an item metadata file (ids stripped), one row per item.

    Rows without an id or a title are dropped: a blank title never replaces a stored one; of
    rows repeating an id, the last is kept. The counts of both come back beside the titles.

    Raises:
        RecsysInputError: the file is missing, unreadable, or lacks either column.

    """
    lf = scan_file(path, fmt)
    try:
        schema = lf.collect_schema()
        names = schema.names()
        for col in (id_col, title_col):
            if col not in names:
                raise RecsysInputError(f"{path}: no column {col!r} (columns found: {names[:10]})")
        titles = lf.select(
            id_text(id_col, schema[id_col]).alias("item_id"),
            pl.col(title_col).cast(pl.String).alias("title"),
        ).collect()
    except pl.exceptions.PolarsError as err:
        raise RecsysInputError(f"{path}: cannot read: {str(err).splitlines()[0]}") from None
    given = [pl.col(c).is_not_null() & (pl.col(c).str.strip_chars() != "") for c in titles.columns]
    usable = titles.filter(*given)
    unique = usable.unique("item_id", keep="last", maintain_order=True)
    return TitlesRead(unique, titles.height - usable.height, usable.height - unique.height)


class TitlesRead(NamedTuple):
    """An item metadata file's titles, one row per item, and the rows left out."""

    titles: pl.DataFrame  # item_id, title
    blank: int  # rows without an id or a title
    repeated: int  # rows whose id a later row gave again
