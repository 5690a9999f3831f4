"""Splits: leave-one-out and time cut with hand-worked answers, no leakage, k-core, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from data.errors import RecsysInputError
from data.ingest import ingest_files
from data.split import build_splits, kcore_filter
from data.workspace import Workspace


def ingest_rows(ws: Workspace, tmp_path: Path, rows: list[tuple[str, str, int]]) -> None:
    path = tmp_path / f"log{len(list(tmp_path.glob('*.csv')))}.csv"
    pl.DataFrame(rows, schema=["user_id", "item_id", "timestamp"], orient="row").write_csv(path)
    ingest_files(ws, [path])


def idx(ws: Workspace) -> dict[str, int]:
    from data.vocab import load_item_vocab

    return dict(load_item_vocab(ws).select("item_id", "item_idx").iter_rows())


def test_loo_orders_by_time_then_arrival(ws: Workspace, tmp_path: Path) -> None:
    # u1 arrives out of time order, with a tie at t=5 broken by arrival (c before d).
    rows = [("u1", "a", 9), ("u1", "c", 5), ("u1", "d", 5), ("u1", "b", 1), ("u2", "a", 1)]
    rows += [("u2", "b", 2), ("u3", "e", 1), ("u3", "a", 2), ("u3", "b", 3)]
    ingest_rows(ws, tmp_path, rows)
    i = idx(ws)
    s = build_splits(ws, "loo")
    assert s.num_items == 5
    assert s.train.rows() == [(1, [i["b"], i["c"]]), (2, [i["a"], i["b"]]), (3, [i["e"]])]
    assert s.val.rows() == [(1, [i["b"], i["c"]], i["d"]), (3, [i["e"]], i["a"])]
    assert s.test.rows() == [(1, [i["b"], i["c"], i["d"]], i["a"]), (3, [i["e"], i["a"]], i["b"])]
    assert s.train.schema == {"user_idx": pl.Int64, "items": pl.List(pl.Int64)}
    assert s.test.schema == {
        "user_idx": pl.Int64,
        "history": pl.List(pl.Int64),
        "target": pl.Int64,
    }


def test_loo_order_survives_later_ingest(ws: Workspace, tmp_path: Path) -> None:
    ingest_rows(ws, tmp_path, [("u", "late", 100), ("u", "x", 1)])
    ingest_rows(ws, tmp_path, [("u", "early", 0), ("u", "y", 1)])  # tie at 1: x arrived first
    i = idx(ws)
    s = build_splits(ws, "loo")
    assert s.test.rows() == [(1, [i["early"], i["x"], i["y"]], i["late"])]


def test_time_split_has_no_leakage(ws: Workspace, tmp_path: Path) -> None:
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "c", 3), ("u1", "d", 10), ("u1", "e", 11)]
    rows += [("u2", "a", 4), ("u2", "f", 12), ("u3", "g", 20), ("u4", "b", 5), ("u4", "c", 6)]
    ingest_rows(ws, tmp_path, rows)
    i = idx(ws)
    s = build_splits(ws, "time", cutoff=10)
    assert s.train.rows() == [(1, [i["a"], i["b"]]), (2, [i["a"]]), (4, [i["b"]])]
    assert s.val.rows() == [(1, [i["a"], i["b"]], i["c"]), (4, [i["b"]], i["c"])]
    assert s.test.rows() == [(1, [i["a"], i["b"], i["c"]], i["d"]), (2, [i["a"]], i["f"])]
    after_cut = {i[x] for x in "defg"}
    trained = {x for seq in s.train["items"] for x in seq}
    val_seen = {x for seq in s.val["history"] for x in seq} | set(s.val["target"])
    assert not trained & after_cut and not val_seen & after_cut


def test_kcore_is_iterative() -> None:
    # k=2, pass 1: items 12 and 14 have one event each and go; that leaves u3 and u4 with
    # one event each, so pass 2 drops them, and with them item 13.
    events = pl.DataFrame(
        {"user_idx": [1, 1, 2, 2, 3, 3, 4, 4], "item_idx": [10, 11, 10, 11, 12, 13, 13, 14]}
    )
    kept = kcore_filter(events, 2)
    assert sorted(kept.rows()) == [(1, 10), (1, 11), (2, 10), (2, 11)]
    assert kcore_filter(events, 0).height == 8


def test_since_splits_only_the_events_at_or_after_it(ws: Workspace, tmp_path: Path) -> None:
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "c", 3), ("u1", "d", 4), ("u1", "e", 5)]
    rows += [("u2", "a", 1), ("u2", "b", 2), ("u3", "f", 4), ("u3", "g", 6), ("u3", "h", 7)]
    ingest_rows(ws, tmp_path, rows)
    i = idx(ws)
    s = build_splits(ws, "loo", since=3)  # u1 from c on, u2 not at all, u3 whole
    assert s.train.rows() == [(1, [i["c"]]), (3, [i["f"]])]
    assert s.val.rows() == [(1, [i["c"]], i["d"]), (3, [i["f"]], i["g"])]
    assert s.test.rows() == [(1, [i["c"], i["d"]], i["e"]), (3, [i["f"], i["g"]], i["h"])]
    assert s.num_items == 8  # the vocabulary is not filtered: indices stay stable
    with pytest.raises(RecsysInputError, match="no events at or after --since 8"):
        build_splits(ws, "loo", since=8)


def test_kcore_in_build_splits(ws: Workspace, tmp_path: Path) -> None:
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u2", "a", 1), ("u2", "b", 2), ("u3", "z", 1)]
    ingest_rows(ws, tmp_path, rows)
    s = build_splits(ws, "loo", kcore=2)
    assert s.train["user_idx"].to_list() == [1, 2]
    assert s.num_items == 3  # the vocabulary is not filtered: indices stay stable
    with pytest.raises(RecsysInputError, match="5-core"):
        build_splits(ws, "loo", kcore=5)


def test_split_errors(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="no events"):
        build_splits(ws)
    ingest_rows(ws, tmp_path, [("u", "a", 5)])
    with pytest.raises(RecsysInputError, match="cutoff"):
        build_splits(ws, "time")
    with pytest.raises(RecsysInputError, match="before the cutoff"):
        build_splits(ws, "time", cutoff=1)
    with pytest.raises(RecsysInputError, match="unknown split"):
        build_splits(ws, "random")  # type: ignore[arg-type]


def test_an_ingest_during_the_split_never_gives_an_item_beyond_the_catalogue(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import data.split

    ingest_rows(ws, tmp_path, [("u", "a", 1), ("u", "b", 2), ("u", "c", 3)])
    read_vocab = data.split.load_item_vocab

    def read_then_ingest(w: Workspace) -> pl.DataFrame:
        vocab = read_vocab(w)
        ingest_rows(ws, tmp_path, [("u", "new1", 4), ("v", "new2", 1), ("v", "a", 2)])
        return vocab

    monkeypatch.setattr(data.split, "load_item_vocab", read_then_ingest)
    s = build_splits(ws, "loo")
    assert s.num_items == 3
    indices = s.train["items"].explode().to_list() + s.test["target"].to_list()
    assert max(indices) <= s.num_items


@pytest.mark.parametrize("method", ["loo", "time"])
def test_shards_partition_the_splits_and_count_every_shards_train(
    ws: Workspace, tmp_path: Path, method: str
) -> None:
    from data.synth import generate_events

    path = tmp_path / "log.csv"
    generate_events(60, 30, 900, seed=1).write_csv(path)
    ingest_files(ws, [path])
    cutoff = int(pl.read_csv(path)["timestamp"].median()) if method == "time" else None
    whole = build_splits(ws, method, cutoff)  # type: ignore[arg-type]
    shards = [build_splits(ws, method, cutoff, shard=(s, 3)) for s in range(3)]  # type: ignore[arg-type]
    for name in ("train", "val", "test"):
        joined = pl.concat([getattr(shard, name) for shard in shards]).sort("user_idx")
        assert joined.equals(getattr(whole, name).sort("user_idx")), name
    for s, shard in enumerate(shards):
        assert shard.train.height > 0 and (shard.train["user_idx"] % 3 == s).all()
        assert shard.shard == (s, 3) and shard.num_items == whole.num_items
    counts = np.bincount(whole.train["items"].explode().to_numpy(), minlength=31)
    assert whole.train_counts is None
    assert all(np.array_equal(shard.train_counts, counts) for shard in shards)
    alone = build_splits(ws, method, cutoff, shard=(1, 3), count_every_shard=False)  # type: ignore[arg-type]
    assert alone.train_counts is None and alone.test.equals(shards[1].test)


def test_shard_errors_and_a_split_of_named_parts(ws: Workspace, tmp_path: Path) -> None:
    ingest_rows(ws, tmp_path, [("u", "a", 1), ("u", "b", 2), ("u", "c", 3), ("v", "a", 1)])
    first = build_splits(ws)
    with pytest.raises(RecsysInputError, match="data.kcore"):
        build_splits(ws, kcore=2, shard=(0, 2))
    with pytest.raises(RecsysInputError, match="shard 2 of 2"):
        build_splits(ws, shard=(2, 2))
    ingest_rows(ws, tmp_path, [("u", "d", 4), ("w", "a", 1), ("w", "b", 2), ("w", "c", 3)])
    again = build_splits(ws, parts=first.parts)  # the events of the first split, nothing new
    assert again.test.equals(first.test) and again.train.equals(first.train)
    assert build_splits(ws).test.height == 2
