"""Ingest: formats, column mapping, timestamps, reject reasons, duplicates, vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from data.errors import RecsysInputError
from data.ingest import LogLayout, ingest_files, ingest_rows
from data.store import count_events, has_events, read_events
from data.validate import DUP_INPUT, DUP_STORED
from data.vocab import load_item_vocab, load_user_vocab
from data.workspace import Workspace

ROWS = [("u1", "a", 10), ("u1", "b", 20), ("u2", "a", 15)]


def events_of(ws: Workspace) -> list[tuple[str, str, int, int]]:
    return [tuple(r) for r in read_events(ws).sort("event_seq").collect().iter_rows()]


def test_empty_store_has_schema(ws: Workspace) -> None:
    assert not has_events(ws)
    frame = read_events(ws).collect()
    assert frame.height == 0
    assert frame.schema == {
        "user_id": pl.String,
        "item_id": pl.String,
        "timestamp": pl.Int64,
        "event_seq": pl.Int64,
    }
    assert load_item_vocab(ws).height == 0


def test_csv_with_bom_crlf_quotes_and_extra_columns(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(
        b'\xef\xbb\xbfuser_id,item_id,timestamp,note\r\n"u,1","say ""hi""",10,x\r\nu2,0042,20,\r\n'
    )
    report = ingest_files(ws, [path])
    assert (report.accepted, report.rejected, report.events_total) == (2, 0, 2)
    assert report.rejects_path is None
    assert events_of(ws) == [("u,1", 'say "hi"', 10, 0), ("u2", "0042", 20, 1)]


def test_parquet_with_int_ids_and_datetime(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    pl.DataFrame(
        {
            "user_id": [7, 8],
            "item_id": ["x", "y"],
            "timestamp": pl.Series(
                ["2024-01-01T00:00:00", "1970-01-01T00:01:40"]
            ).str.to_datetime(),
        }
    ).write_parquet(path)
    ingest_files(ws, [path])
    assert events_of(ws) == [("7", "x", 1704067200, 0), ("8", "y", 100, 1)]


def test_ndjson_and_format_override(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "log.data"  # extension says nothing: --format decides
    lines = [
        {"user_id": "u1", "item_id": 5, "timestamp": 30, "extra": [1, 2]},
        {"user_id": "u2", "item_id": "b", "timestamp": "1970-01-01T00:00:40Z"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(RecsysInputError, match="--format"):
        ingest_files(ws, [path])
    ingest_files(ws, [path], LogLayout(fmt="ndjson"))
    assert events_of(ws) == [("u1", "5", 30, 0), ("u2", "b", 40, 1)]


def test_column_mapping(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("who,what,when,user_id\nalice,book,5,ignored\n")
    with pytest.raises(RecsysInputError, match="no column 'item_id'"):
        ingest_files(ws, [path])
    ingest_files(ws, [path], LogLayout(user_col="who", item_col="what", time_col="when"))
    assert events_of(ws) == [("alice", "book", 5, 0)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000", 1700000000),
        ("2024-01-02", 1704153600),
        ("2024-01-02T03:04:05Z", 1704164645),
        ("2024-01-02 03:04:05", 1704164645),
        ("2024-01-02T03:04:05+02:00", 1704157445),
        ("2024-01-02T03:04:05.750-01:00", 1704168245),
        ("2024-01-02T03:04", 1704164640),
    ],
)
def test_iso_timestamps(ws: Workspace, tmp_path: Path, text: str, expected: int) -> None:
    path = tmp_path / "log.csv"
    path.write_text(f"user_id,item_id,timestamp\nu,i,{text}\n")
    assert ingest_files(ws, [path]).accepted == 1
    assert events_of(ws)[0][2] == expected


def test_every_reject_reason(ws: Workspace, tmp_path: Path) -> None:
    stored = tmp_path / "first.csv"
    stored.write_text("user_id,item_id,timestamp\nu9,i9,99\n")
    ingest_files(ws, [stored])
    long_id = "x" * 257
    path = tmp_path / "log.ndjson"
    rows = [
        {"user_id": None, "item_id": "i", "timestamp": 1},
        {"user_id": "u", "item_id": None, "timestamp": 1},
        {"user_id": "  ", "item_id": "i", "timestamp": 1},
        {"user_id": "u", "item_id": "", "timestamp": 1},
        {"user_id": long_id, "item_id": "i", "timestamp": 1},
        {"user_id": "u", "item_id": long_id, "timestamp": 1},
        {"user_id": "u", "item_id": "i", "timestamp": None},
        {"user_id": "u", "item_id": "i", "timestamp": "yesterday"},
        {"user_id": "u", "item_id": "i", "timestamp": "2024-02-30"},
        {"user_id": "u", "item_id": "ok", "timestamp": 5},
        {"user_id": "u", "item_id": "ok", "timestamp": "1970-01-01T00:00:05Z"},
        {"user_id": "u9", "item_id": "i9", "timestamp": 99},
        {"user_id": "x" * 256, "item_id": "ok", "timestamp": 6},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = ingest_files(ws, [path])
    assert (report.accepted, report.rejected) == (2, 11)
    rejects = pl.read_parquet(report.rejects_path)
    assert rejects["row"].to_list() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12]
    assert rejects["reason"].to_list() == [
        "null user_id",
        "null item_id",
        "empty user_id",
        "empty item_id",
        "user_id longer than 256 characters",
        "item_id longer than 256 characters",
        "missing timestamp",
        "unparseable timestamp",
        "unparseable timestamp",
        DUP_INPUT,
        DUP_STORED,
    ]
    assert set(rejects["source"]) == {str(path)}
    assert rejects["timestamp"][7] == "yesterday"
    assert report.events_total == count_events(ws) == 3


def test_whole_numbers_written_as_floats_are_unix_seconds_in_csv_as_in_ndjson(
    ws: Workspace, tmp_path: Path
) -> None:
    path = tmp_path / "pandas.csv"  # pandas writes a timestamp column holding a NaN as floats
    path.write_text("user_id,item_id,timestamp\nu,a,1700000000.0\nu,b,1700000001.\nu,c,17.5\n")
    report = ingest_files(ws, [path])
    assert (report.accepted, report.rejected) == (2, 1)
    stamps = read_events(ws).collect()["timestamp"].to_list()
    assert sorted(stamps) == [1700000000, 1700000001]
    assert pl.read_parquet(report.rejects_path)["reason"].to_list() == ["unparseable timestamp"]


def test_duplicates_across_ingests_and_files(ws: Workspace, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("user_id,item_id,timestamp\nu,i,1\nu,j,2\n")
    b.write_text("user_id,item_id,timestamp\nu,j,2\nu,k,3\n")
    first = ingest_files(ws, [a, b])
    assert (first.accepted, first.rejected) == (3, 1)
    again = ingest_files(ws, [a, b])
    assert (again.accepted, again.rejected, again.events_total) == (0, 4, 3)
    reasons = pl.read_parquet(again.rejects_path)["reason"].to_list()
    assert reasons == [DUP_STORED, DUP_STORED, DUP_INPUT, DUP_STORED]


def test_vocab_is_append_only_and_counts(ws: Workspace, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("user_id,item_id,timestamp\nu1,b,20\nu1,a,10\nu2,b,5\n")
    b.write_text("user_id,item_id,timestamp\nu3,c,1\nu3,a,2\nu1,z,30\n")
    ingest_files(ws, [a])
    before = load_item_vocab(ws)
    assert before.rows() == [("b", 1, 5, 2), ("a", 2, 10, 1)]
    ingest_files(ws, [b])
    after = load_item_vocab(ws)
    assert after.rows() == [("b", 1, 5, 2), ("a", 2, 2, 2), ("c", 3, 1, 1), ("z", 4, 30, 1)]
    users = load_user_vocab(ws)
    assert users.select("user_id", "user_idx", "count").rows() == [
        ("u1", 1, 3),
        ("u2", 2, 1),
        ("u3", 3, 2),
    ]


def test_stale_vocab_is_rebuilt_identically(ws: Workspace, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("user_id,item_id,timestamp\nu1,b,20\nu1,a,10\n")
    b.write_text("user_id,item_id,timestamp\nu3,c,1\nu3,a,2\n")
    ingest_files(ws, [a])
    stale = ws.items_vocab_path.read_bytes()
    ingest_files(ws, [b])
    expected = load_item_vocab(ws)
    # As if a crash hit after the part was committed but before the vocab was rewritten.
    ws.items_vocab_path.write_bytes(stale)
    assert load_item_vocab(ws).equals(expected)


def test_unreadable_file_stores_nothing(ws: Workspace, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("user_id,item_id,timestamp\nu,i,1\n")
    bad.write_text("")
    with pytest.raises(RecsysInputError, match="bad.csv: empty file"):
        ingest_files(ws, [good, bad])
    assert not ws.root.exists() or not any(ws.root.rglob("*.parquet"))


def test_crash_before_commit_leaves_store_unchanged(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data import store

    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("user_id,item_id,timestamp\nu,i,1\n")
    second.write_text("user_id,item_id,timestamp\nu,j,2\n,k,3\n")
    ingest_files(ws, [first])
    before = {p: p.read_bytes() for p in ws.root.rglob("*.parquet")}

    def power_cut(tmp: Path, path: Path) -> None:  # the rename never happens
        raise OSError("disk gone")

    monkeypatch.setattr(store, "commit", power_cut)
    with pytest.raises(OSError, match="disk gone"):
        ingest_files(ws, [second])
    after = {p: p.read_bytes() for p in ws.root.rglob("*.parquet")}
    assert after == before  # no part, no rejects, no temp file left behind
    monkeypatch.undo()
    assert ingest_files(ws, [second]).events_total == 2


def test_stale_temp_files_are_ignored_and_cleaned(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("user_id,item_id,timestamp\nu,i,1\n")
    ingest_files(ws, [path])
    stale = ws.events_dir / ".tmp-dead-part-x.parquet"
    stale.write_bytes(b"half a part")
    stale_record = ws.root / ".tmp-dead-ingested.json"  # an ingest killed in its record
    stale_record.write_text("{")
    journal = ws.root / ".tmp-live-retrain.json"  # written under the training lock, not this one
    journal.write_text("{")
    assert read_events(ws).collect().height == 1  # readers never see temp names
    path.write_text("user_id,item_id,timestamp\nu,i,2\n")
    ingest_files(ws, [path])
    assert not stale.exists() and not stale_record.exists() and journal.exists()
    assert count_events(ws) == 2


def test_directory_and_header_only(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="not a regular file"):
        ingest_files(ws, [tmp_path])
    header = tmp_path / "h.csv"
    header.write_text("user_id,item_id,timestamp\n")
    report = ingest_files(ws, [header])
    assert (report.accepted, report.rejected, report.events_total) == (0, 0, 0)
    assert not has_events(ws)


def test_float_id_columns_give_the_integer_ids_pandas_meant(ws: Workspace, tmp_path: Path) -> None:
    first = tmp_path / "a.csv"
    first.write_text("user_id,item_id,timestamp\n123,7,1700000000\n")
    ingest_files(ws, [first])
    floats = tmp_path / "b.parquet"  # an int column with a missing value, as pandas writes it
    pl.DataFrame(
        {"user_id": [123.0, None, 5.5], "item_id": [7.0, 8.0, 9.0], "timestamp": [1700000000] * 3}
    ).write_parquet(floats)
    report = ingest_files(ws, [floats])
    assert (report.accepted, report.rejected) == (1, 2)
    reasons = pl.read_parquet(report.rejects_path).sort("row")["reason"].to_list()
    assert reasons == [DUP_STORED, "null user_id"]  # 123.0 is the stored event of user 123
    assert sorted(load_user_vocab(ws)["user_id"].to_list()) == ["123", "5.5"]
    mixed = tmp_path / "c.ndjson"
    mixed.write_text('{"user_id": 1, "item_id": 2.0, "timestamp": 5}\n')
    ingest_files(ws, [mixed])
    assert "2" in load_item_vocab(ws)["item_id"].to_list()


def test_nan_and_infinite_float_ids_are_missing_ids(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"  # polars and numpy write NaN where pandas would write null
    nan, inf = float("nan"), float("inf")
    pl.DataFrame(
        {"user_id": [1.0, nan, 2.0], "item_id": [7.0, 8.0, -inf], "timestamp": [5, 6, 7]}
    ).write_parquet(path)
    report = ingest_files(ws, [path])
    assert (report.accepted, report.rejected) == (1, 2)
    reasons = pl.read_parquet(report.rejects_path).sort("row")["reason"].to_list()
    assert reasons == ["null user_id", "null item_id"]
    assert load_user_vocab(ws)["user_id"].to_list() == ["1"]


def test_reasons_come_in_the_documented_order(ws: Workspace) -> None:
    rows = [("u" * 300, "", 1), ("", "i" * 300, 2), ("u" * 300, "i" * 300, 3)]
    _, rejected = ingest_rows(ws, rows)
    assert rejected["reason"].to_list() == [
        "empty item_id", "empty user_id", "user_id longer than 256 characters",
    ]  # fmt: skip
