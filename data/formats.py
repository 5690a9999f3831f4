"""Reading event logs (CSV, Parquet, NDJSON) into one raw frame with the canonical column names.

This module owns everything about *files*: picking the format, refusing files that cannot be
read at all (with one message naming the file and the problem), mapping the user's column
names onto `user_id, item_id, timestamp`, and turning timestamps (integers, ISO-8601 strings,
parquet datetimes) into Unix seconds. Row-level validation lives in `data.ingest`.

The raw frame has `user_id: str, item_id: str, timestamp: int64` (null where the value was
missing or could not be parsed) plus `ts_raw: str` (the timestamp as written, for the rejects
file and to tell "null" from "unparseable"). `raw_from_rows` builds the same frame from rows
already in memory (events posted over HTTP), with the same stripping and timestamp parsing.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from data.errors import RecsysInputError

FORMATS = ("csv", "parquet", "ndjson")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "ndjson",
}
_SNIFF_BYTES = 1 << 16
# byte-order marks of the wider Unicode encodings (UTF-32 LE's begins with UTF-16 LE's: first)
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
)  # fmt: skip
# Tried in order; each yields null where it does not match, so the first match wins.
_ISO_FORMATS = (
    ("%Y-%m-%dT%H:%M:%S%.f%z", True),
    ("%Y-%m-%dT%H:%M:%S%.f", False),
    ("%Y-%m-%dT%H:%M%z", True),
    ("%Y-%m-%dT%H:%M", False),
    ("%Y-%m-%d", False),
)


def detect_format(path: Path, fmt: str | None) -> str:
    """The format of `path`: `fmt` when given, else from the file extension.

    Raises:
        RecsysInputError: unknown `fmt`, or no `fmt` and an extension we do not know.

    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise RecsysInputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
        return fmt
    found = _EXTENSIONS.get(path.suffix.lower())
    if found is None:
        raise RecsysInputError(
            f"{path}: cannot tell the format from the extension {path.suffix!r}; "
            f"pass --format ({'|'.join(FORMATS)})"
        )
    return found


def check_file(path: Path) -> None:
    """Refuse a path that is missing, not a regular file, or empty."""
    if not path.exists():
        raise RecsysInputError(f"{path}: no such file")
    if not path.is_file():
        raise RecsysInputError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise RecsysInputError(f"{path}: empty file")


def _check_text(path: Path, fmt: str) -> None:
    """Refuse binary content in a text format before polars turns it into odd columns."""
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    if not head.strip():
        raise RecsysInputError(f"{path}: empty file")
    wide = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)
    if wide is not None:  # a spreadsheet's "Unicode text" export: NUL bytes, but text
        raise RecsysInputError(
            f"{path}: {wide} text; logs are read as UTF-8: convert it first "
            f"(iconv -f {wide} -t UTF-8 {path.name} > {path.stem}-utf8{path.suffix})"
        )
    if b"\x00" in head:
        raise RecsysInputError(f"{path}: binary content, not a {fmt.upper()} file")
    try:
        # An incremental decoder tolerates a multi-byte character cut at the sniff boundary.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as err:
        raise RecsysInputError(
            f"{path}: not UTF-8 text (byte {err.start}), not a {fmt.upper()} file"
        ) from None


def _check_parquet(path: Path) -> None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(4)
        fh.seek(max(size - 4, 0))
        tail = fh.read(4)
    if head != b"PAR1":
        raise RecsysInputError(f"{path}: not a parquet file (no PAR1 magic)")
    if tail != b"PAR1":
        raise RecsysInputError(f"{path}: truncated or corrupt parquet file (no PAR1 footer)")


def scan_file(path: Path, fmt: str) -> pl.LazyFrame:
    """A lazy scan of one file after the cheap checks (exists, non-empty, looks like `fmt`)."""
    check_file(path)
    if fmt == "parquet":
        _check_parquet(path)
        return pl.scan_parquet(path)
    _check_text(path, fmt)
    if fmt == "csv":
        separator = "\t" if path.suffix.lower() == ".tsv" else ","
        return pl.scan_csv(
            path,
            separator=separator,
            infer_schema=False,  # every column as text: ids keep leading zeros
            empty_string_is_null=False,  # "" is an empty id, not a missing one
            truncate_ragged_lines=True,
            raise_if_empty=True,
        )
    return pl.scan_ndjson(path, infer_schema_length=None)


def id_text(col: str, dtype: pl.DataType) -> pl.Expr:
    """An id column as stripped text; a float column's whole numbers without `.0`.

    pandas writes an int column holding a missing value as floats: 123.0 is the id 123. NaN
    and infinities are missing ids (null), not the ids "NaN" and "inf".
    """
    text = pl.col(col).cast(pl.String)
    if dtype.is_float():
        whole = pl.col(col) == pl.col(col).floor()
        as_int = pl.col(col).cast(pl.Int64, strict=False).cast(pl.String)
        text = pl.when(whole & as_int.is_not_null()).then(as_int).otherwise(text)
        text = pl.when(pl.col(col).is_finite()).then(text).otherwise(None)
    return text.str.strip_chars()


def _int_from_text(col: pl.Expr) -> pl.Expr:
    """Integer text (Unix seconds) -> Int64; null for anything else (ISO-8601 is done later).

    A whole number written as a float (`1700000000.0`: pandas writes a column holding a NaN
    so) is an integer too, as it is in NDJSON.
    """
    text = col.str.strip_chars().str.replace(r"\.0*$", "")
    return pl.when(text.str.contains(r"^[+-]?\d{1,18}$")).then(text.cast(pl.Int64, strict=False))


def _iso_from_text(col: pl.Expr) -> pl.Expr:
    """ISO-8601 text -> Int64 Unix seconds (naive times are UTC); null where no format fits."""
    iso = (
        col.str.strip_chars()
        .str.replace(r"[zZ]$", "+00:00")
        .str.replace(r"^(\d{4}-\d\d-\d\d) ", "${1}T")
    )
    parsed = [
        iso.str.to_datetime(f, strict=False, time_unit="us", time_zone="UTC" if tz else None)
        .dt.epoch("s")
        .cast(pl.Int64)
        for f, tz in _ISO_FORMATS
    ]
    return pl.coalesce(*parsed)


def _fill_iso(frame: pl.DataFrame) -> pl.DataFrame:
    """Parse ISO-8601 only on the rows the integer parse left null: integer logs stay fast."""
    need = (frame["timestamp"].is_null() & frame["ts_raw"].is_not_null()).arg_true()
    if need.len() == 0:
        return frame
    parsed = frame[need].select(_iso_from_text(pl.col("ts_raw"))).to_series()
    return frame.with_columns(frame["timestamp"].scatter(need, parsed))


def _timestamp_expr(name: str, dtype: pl.DataType) -> pl.Expr:
    col = pl.col(name)
    if dtype.is_integer():
        return col.cast(pl.Int64, strict=False)
    if dtype.is_float():
        # Only whole, finite seconds are timestamps; 1.5 is not a moment we can store.
        ok = col.is_finite() & (col == col.floor())
        return pl.when(ok).then(col.cast(pl.Int64, strict=False))
    if isinstance(dtype, pl.Datetime | pl.Date):
        return col.dt.epoch("s").cast(pl.Int64)
    return _int_from_text(col.cast(pl.String, strict=False))


def read_raw(
    path: Path, fmt: str, user_col: str, item_col: str, time_col: str, file_no: int
) -> pl.DataFrame:
    """Read one file into the raw canonical frame (see module docstring).

    Args:
        path: The log file.
        fmt: One of FORMATS.
        user_col: Column holding the user id in this file.
        item_col: Column holding the item id.
        time_col: Column holding the timestamp.
        file_no: Position of the file in this ingest (kept as `file_no` for ordering).

    Returns:
        Columns `file_no, row, user_id, item_id, timestamp, ts_raw`; `row` is 1-based
        within the file (data rows, header excluded).

    Raises:
        RecsysInputError: the file cannot be read, or lacks one of the three columns.

    """
    try:
        lf = scan_file(path, fmt)
        schema = lf.collect_schema()
        missing = [c for c in (user_col, item_col, time_col) if c not in schema]
        if missing:
            found = ", ".join(schema.names()[:10]) or "none"
            raise RecsysInputError(f"{path}: no column {missing[0]!r} (columns found: {found})")
        # a CSV header naming a column twice: the reader renames the second; which is meant?
        repeated = [c for c in (user_col, item_col, time_col) if f"{c}_duplicated_0" in schema]
        if repeated:
            raise RecsysInputError(f"{path}: the header names column {repeated[0]!r} twice")
        out = lf.select(
            pl.lit(file_no, dtype=pl.Int32).alias("file_no"),
            (pl.int_range(pl.len(), dtype=pl.Int64) + 1).alias("row"),
            id_text(user_col, schema[user_col]).alias("user_id"),
            id_text(item_col, schema[item_col]).alias("item_id"),
            _timestamp_expr(time_col, schema[time_col]).alias("timestamp"),
            pl.col(time_col).cast(pl.String).alias("ts_raw"),
        )
        return _fill_iso(out.collect(engine="streaming"))
    except RecsysInputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RecsysInputError(f"{path}: cannot read as {fmt.upper()}: {problem}") from None


RawRow = tuple[str | None, str | None, int | str | None]  # user_id, item_id, timestamp


def raw_from_rows(rows: Sequence[RawRow], file_no: int = 0) -> pl.DataFrame:
    """The raw canonical frame of in-memory rows, parsed as a text log would be.

    Args:
        rows: (user_id, item_id, timestamp) with the timestamp as integer Unix seconds or
            ISO-8601 text; None where a value is missing.
        file_no: Kept as `file_no`, as for a file.

    Returns:
        Columns `file_no, row, user_id, item_id, timestamp, ts_raw` (`row` 1-based); ids are
        stripped of outer spaces and timestamps parsed exactly like a CSV's.

    """
    users, items, stamps = zip(*rows, strict=True) if rows else ((), (), ())
    frame = pl.DataFrame(
        {
            "user_id": list(users),
            "item_id": list(items),
            "ts_raw": [None if t is None else str(t) for t in stamps],
        },
        schema={"user_id": pl.String, "item_id": pl.String, "ts_raw": pl.String},
    )
    out = frame.select(
        pl.lit(file_no, dtype=pl.Int32).alias("file_no"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + 1).alias("row"),
        pl.col("user_id").str.strip_chars(),
        pl.col("item_id").str.strip_chars(),
        _int_from_text(pl.col("ts_raw")).alias("timestamp"),
        "ts_raw",
    )
    return _fill_iso(out)
