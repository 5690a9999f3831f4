"""Why an ingested row is refused: `classify` gives every row its first reason, or none.

Reasons, first match wins, in this order:

- `null user_id` / `null item_id`: the value is missing (null in parquet/NDJSON; a short CSV
  row's missing fields read as empty text: `empty ...`);
- `empty user_id` / `empty item_id`: empty or only whitespace (ids are stripped of outer spaces);
- `user_id longer than 256 characters` / the same for `item_id`;
- `missing timestamp`: null or empty; `unparseable timestamp`: neither an integer nor ISO-8601;
- `duplicate within the input`: the same (user_id, item_id, timestamp) appeared earlier in this
  ingest (the first copy is kept);
- `duplicate of a stored event`: that triple is already in the store (a polars semi-join
  against the stored parts, never a Python loop over history).
"""

from __future__ import annotations

import logging

import polars as pl

from data import store
from data.workspace import Workspace

log = logging.getLogger("recsys.data.ingest")

MAX_ID_CHARS = 256
KEYS = ["user_id", "item_id", "timestamp"]
DUP_INPUT = "duplicate within the input"
DUP_STORED = "duplicate of a stored event"


def _id_checks(name: str) -> list[tuple[pl.Expr, str]]:
    col = pl.col(name)
    return [
        (col.is_null(), f"null {name}"),
        (col == "", f"empty {name}"),
        (col.str.len_chars() > MAX_ID_CHARS, f"{name} longer than {MAX_ID_CHARS} characters"),
    ]


def _row_reason() -> pl.Expr:
    """The first row-level problem of each row (null when the row is valid on its own)."""
    user, item = _id_checks("user_id"), _id_checks("item_id")
    checks = [  # null, null, empty, empty, long, long: docs/reference/data-formats.md's order
        *(check for pair in zip(user, item, strict=True) for check in pair),
        (
            pl.col("ts_raw").is_null() | (pl.col("ts_raw").str.strip_chars() == ""),
            "missing timestamp",
        ),
        (pl.col("timestamp").is_null(), "unparseable timestamp"),
    ]
    # coalesce keeps the first non-null label: the first failing check in list order.
    labels = [pl.when(cond).then(pl.lit(label, dtype=pl.String)) for cond, label in checks]
    return pl.coalesce(labels).alias("reason")


def _key_hash() -> pl.Expr:
    # A 64-bit hash of the key narrows both duplicate checks to candidate rows cheaply; the
    # candidates are then compared on the real key, so a hash collision never rejects a row.
    return pl.struct(KEYS).hash().alias("_h")


def _input_duplicates(valid: pl.DataFrame) -> pl.Series:
    """`_i` of rows whose key already appeared earlier in this ingest."""
    shared = valid.filter(pl.col("_h").is_duplicated())
    return shared.filter(~pl.struct(KEYS).is_first_distinct())["_i"]


def _stored_duplicates(ws: Workspace, fresh: pl.DataFrame) -> pl.Series:
    """`_i` of rows whose key is already in the store (semi-joins in polars, no Python loop)."""
    stored = store.read_events(ws).select(KEYS).with_columns(_key_hash())
    candidates = (
        fresh.lazy().join(stored.select("_h"), on="_h", how="semi").collect(engine="streaming")
    )
    if candidates.height == 0:
        return pl.Series("_i", [], dtype=pl.UInt32)
    same_hash = stored.join(candidates.lazy().select("_h"), on="_h", how="semi").select(KEYS)
    return (
        candidates.lazy()
        .join(same_hash, on=KEYS, how="semi")
        .select("_i")
        .collect(engine="streaming")["_i"]
    )


def classify(ws: Workspace, raw: pl.DataFrame) -> pl.DataFrame:
    """`raw` with a final `reason` column (duplicates included); `_i` is the row position."""
    df = raw.with_columns(_row_reason())
    valid = df.filter(pl.col("reason").is_null()).select("_i", *KEYS, _key_hash())
    dup_input = _input_duplicates(valid)
    fresh = valid.filter(~pl.col("_i").is_in(dup_input.implode()))
    reason = df["reason"].scatter(dup_input, DUP_INPUT)
    reason = reason.scatter(_stored_duplicates(ws, fresh), DUP_STORED)
    return df.with_columns(reason)


def rejects(df: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Rejected rows: `source, row, user_id, item_id, timestamp` (as written) and `reason`."""
    sources = pl.DataFrame(
        {"file_no": range(len(names)), "source": names},
        schema={"file_no": pl.Int32, "source": pl.String},
    )
    return (
        df.filter(pl.col("reason").is_not_null())
        .join(sources, on="file_no", how="left", maintain_order="left")
        .select(
            "source", "row", "user_id", "item_id", pl.col("ts_raw").alias("timestamp"), "reason"
        )
    )


def log_reasons(rejected: pl.DataFrame) -> None:
    """One info line per reason, most frequent first."""
    if rejected.height == 0:
        return
    counts = rejected.group_by("reason").len().sort("len", descending=True)
    for reason, n in counts.iter_rows():
        log.info("rejected %d rows: %s", n, reason)
