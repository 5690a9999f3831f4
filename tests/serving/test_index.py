"""faiss indexes: Flat is exact; HNSW and IVF recall@10 against Flat on a real embedding table."""

from __future__ import annotations

import os
import time
from pathlib import Path

import faiss
import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from data.errors import RecsysInputError
from serving.index import build_index, cache_name
from serving.index_kinds import (
    FlatIndex,
    HNSWIndex,
    IndexParams,
    IVFIndex,
    IVFPQIndex,
    pq_subquantizers,
)
from tests.conftest import shared_dataset


def normalised(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def table(n: int, d: int, seed: int = 0) -> np.ndarray:
    emb = normalised(np.random.default_rng(seed).normal(size=(n + 1, d)))
    emb[0] = 0.0
    return emb


def test_flat_is_exact_and_never_returns_padding() -> None:
    emb = table(300, 8)
    queries = normalised(np.random.default_rng(1).normal(size=(20, 8)))
    ids, scores = FlatIndex(emb, IndexParams()).search(queries, 10)
    brute = queries @ emb[1:].T
    want = np.argsort(-brute, axis=1)[:, :10] + 1
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(scores, np.take_along_axis(brute, want - 1, axis=1), rtol=1e-5)
    assert ids.min() >= 1


@pytest.mark.parametrize("k", [5, 40])  # k = 40 of 50 items: both searches find most items
def test_search_by_magnitude_is_the_top_k_of_the_absolute_dot(k: int) -> None:
    emb = table(50, 8)
    queries = normalised(np.random.default_rng(2).normal(size=(6, 8)))
    ids, scores = FlatIndex(emb, IndexParams()).search_by_magnitude(queries, k)
    brute = np.abs(queries @ emb[1:].T)
    want = np.argsort(-brute, axis=1)[:, :k] + 1
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(scores, np.take_along_axis(brute, want - 1, axis=1), rtol=1e-5)
    assert all(len(set(row)) == k for row in ids.tolist())


def test_k_is_clamped_to_the_catalogue() -> None:
    ids, scores = FlatIndex(table(5, 4), IndexParams()).search(np.ones((1, 4), np.float32), 50)
    assert sorted(ids[0].tolist()) == [1, 2, 3, 4, 5] and scores.shape == (1, 5)


def test_auto_picks_flat_for_small_and_unknown_kind_fails() -> None:
    assert build_index(table(50, 4)).kind == "flat"
    assert build_index(table(50, 4), IndexParams(kind="hnsw")).kind == "hnsw"
    with pytest.raises(RecsysInputError, match="index kind 'annoy' unknown"):
        build_index(table(50, 4), IndexParams(kind="annoy"))


@pytest.fixture(scope="module")
def beauty_embeddings() -> tuple[np.ndarray, np.ndarray]:
    """A real embedding table: rank-32 SVD item factors of the amazon-beauty interactions.

    Returns the item table [n + 1, 32] (row 0 padding) and 500 user query vectors.
    """
    events = pl.read_csv(
        shared_dataset("amazon-beauty"),
        schema_overrides={"user_id": pl.String, "item_id": pl.String},
    )
    users = events["user_id"].cast(pl.Categorical).to_physical().to_numpy()
    items = events["item_id"].cast(pl.Categorical).to_physical().to_numpy()
    matrix = sp.csr_matrix((np.ones(len(users), np.float32), (users, items)))
    u, s, vt = svds(matrix, k=32, random_state=0)
    item_table = np.zeros((vt.shape[1] + 1, 32), np.float32)
    item_table[1:] = normalised(vt.T * s)
    rng = np.random.default_rng(0)
    queries = normalised(u[rng.choice(len(u), 500, replace=False)] * s)
    return item_table, queries


def recall_at_10(approx: np.ndarray, exact: np.ndarray) -> float:
    hits = [len(set(a) & set(e)) for a, e in zip(approx.tolist(), exact.tolist(), strict=True)]
    return float(np.mean(hits)) / 10


@pytest.mark.parametrize(
    ("cls", "params", "bound"),
    [
        (HNSWIndex, IndexParams(kind="hnsw"), 0.95),
        (IVFIndex, IndexParams(kind="ivf", ivf_nprobe=16), 0.85),
        (IVFPQIndex, IndexParams(kind="ivfpq", ivf_nprobe=16), 0.6),
    ],
)
def test_approximate_recall_on_real_embeddings(
    beauty_embeddings: tuple[np.ndarray, np.ndarray], cls: type, params: IndexParams, bound: float
) -> None:
    item_table, queries = beauty_embeddings
    exact, _ = FlatIndex(item_table, IndexParams()).search(queries, 10)
    start = time.perf_counter()
    index = cls(item_table, params)
    approx, scores = index.search(queries, 10)
    recall = recall_at_10(approx, exact)
    print(f"{cls.__name__} recall@10={recall:.3f} build+search {time.perf_counter() - start:.2f}s")
    assert recall >= bound
    assert approx.min() >= 1 and np.all(np.diff(scores, axis=1) <= 1e-6)


@pytest.mark.parametrize("kind", ["hnsw", "ivf", "ivfpq"])
def test_cached_build_is_reused_and_gives_the_same_answers(tmp_path: Path, kind: str) -> None:
    emb = table(2000, 16)
    queries = normalised(np.random.default_rng(3).normal(size=(30, 16)))
    params = IndexParams(kind=kind)
    first = build_index(emb, params, cache_dir=tmp_path)
    cached = list(tmp_path.glob(f"index-{kind}-*.faiss"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    again = build_index(emb, params, cache_dir=tmp_path)
    assert cached[0].stat().st_mtime_ns == stamp  # read, not rebuilt and rewritten
    for a, b in zip(first.search(queries, 10), again.search(queries, 10), strict=True):
        np.testing.assert_array_equal(a, b)
    assert build_index(emb, IndexParams(kind="flat"), cache_dir=tmp_path).kind == "flat"
    assert len(list(tmp_path.glob("*.faiss"))) == 1  # flat is never cached


def test_recall_is_measured_on_the_given_queries_at_build_and_kept_beside_the_cache(
    beauty_embeddings: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    item_table, queries = beauty_embeddings
    params = IndexParams(kind="ivfpq", ivf_nprobe=4)
    built = build_index(item_table, params, cache_dir=tmp_path, queries=lambda: queries)
    exact, _ = FlatIndex(item_table, IndexParams()).search(queries, 10)
    approx, _ = built.search(queries, 10)
    record = built.describe()
    assert record["recall@10"] == round(recall_at_10(approx, exact), 4) < 1.0
    assert (record["recall_queries"], record["recall_query_source"]) == (500, "users")
    assert record["bytes_per_item"] == 8 and record["pq_m"] == 8  # d = 32: d / 4 codes of 8 bits

    def not_again() -> np.ndarray:
        raise AssertionError("a cached index is not measured again")

    again = build_index(item_table, params, cache_dir=tmp_path, queries=not_again)
    assert again.describe() == record
    assert FlatIndex(item_table, IndexParams()).quality is None


@pytest.mark.parametrize(("kind", "setting"), [("hnsw", "hnsw_ef_search"), ("ivf", "ivf_nprobe")])
def test_a_changed_search_setting_measures_the_cached_index_again(
    tmp_path: Path, kind: str, setting: str
) -> None:
    emb = table(2000, 16)
    wide = build_index(emb, IndexParams(kind=kind, **{setting: 64}), cache_dir=tmp_path)
    narrow = build_index(emb, IndexParams(kind=kind, **{setting: 1}), cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.faiss"))) == 1  # one cached build serves both
    assert wide.describe()["recall_search"].endswith("=64")
    assert narrow.describe()["recall_search"].endswith("=1")
    assert narrow.describe()["recall@10"] < wide.describe()["recall@10"]  # was the wide one's
    assert narrow.describe()["build_seconds"] == wide.describe()["build_seconds"]  # one build


@pytest.mark.parametrize("kind", ["ivf", "ivfpq"])
def test_ivf_finds_k_items_whenever_the_catalogue_holds_them(kind: str) -> None:
    index = build_index(table(2000, 16), IndexParams(kind=kind))
    queries = normalised(np.random.default_rng(4).normal(size=(5, 16)))
    for k in (10, 1000, 2000):
        ids, _ = index.search(queries, k)
        assert ids.shape == (5, k) and (ids > 0).all()  # was 178 of 1000: too few cells visited
        assert all(len(set(row)) == k for row in ids.tolist())


def test_without_queries_item_rows_stand_in_for_the_recall_check() -> None:
    index = build_index(table(3000, 16), IndexParams(kind="hnsw"))
    quality = index.quality or {}
    assert quality["recall_query_source"] == "items" and quality["recall_queries"] == 1000
    assert 0.9 <= quality["recall@10"] <= 1.0


def test_pq_codes_fit_the_table() -> None:
    assert [pq_subquantizers(d, 0) for d in (256, 64, 16, 10, 3)] == [64, 16, 4, 2, 1]
    assert pq_subquantizers(256, 32) == 32
    with pytest.raises(RecsysInputError, match="pq_m = 5 must divide the embedding size 16"):
        build_index(table(300, 16), IndexParams(kind="ivfpq", pq_m=5))
    tiny = build_index(table(50, 16), IndexParams(kind="ivfpq")).describe()
    assert tiny["pq_bits"] == 5 and tiny["size"] == 50  # 2^8 codes need more than 50 items


def test_a_query_of_another_width_is_refused_not_reshaped() -> None:
    index = FlatIndex(table(50, 4), IndexParams())
    wide = np.ones((2, 16), np.float32)  # before: searched as 8 queries of width 4
    with pytest.raises(ValueError, match=r"queries must be \[Q, 4\], got shape \(2, 16\)"):
        index.search(wide, 5)
    with pytest.raises(ValueError, match=r"got shape \(2, 16\)"):
        index.search_by_magnitude(wide, 5)


def test_a_failed_cache_write_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def partial_then_fail(_index: object, name: str) -> None:
        Path(name).write_bytes(b"half an index")  # what a full disk leaves
        raise RuntimeError("disk full")

    monkeypatch.setattr(faiss, "write_index", partial_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        FlatIndex(table(50, 4), IndexParams()).save(tmp_path / "index-flat.faiss")
    assert list(tmp_path.iterdir()) == []  # before: .index-flat.faiss.tmp-<pid> stayed


def test_saves_of_one_pid_into_one_folder_do_not_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas in containers are all PID 1: one saves while the other's temp is written."""
    path = tmp_path / "index-flat.faiss"
    first = FlatIndex(table(50, 4), IndexParams())
    other = FlatIndex(table(50, 4, seed=1), IndexParams())
    real_write = faiss.write_index
    temps: list[str] = []

    def interleaved(index: object, name: str) -> None:
        temps.append(name)
        real_write(index, name)
        if len(temps) == 1:
            other.save(path)  # before: same temp name, its os.replace took first's temp

    monkeypatch.setattr(faiss, "write_index", interleaved)
    first.save(path)  # before: FileNotFoundError
    assert len(set(temps)) == 2
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert faiss.read_index(str(path)).ntotal == 50


def test_a_killed_writers_cache_temp_is_removed_by_the_next_build(tmp_path: Path) -> None:
    params = IndexParams(kind="hnsw")
    name = cache_name(200, params)
    assert name is not None
    dead, live = tmp_path / f".{name}.tmp-dead", tmp_path / f".{name}.tmp-live"
    dead.write_bytes(b"a SIGKILLed save")
    live.write_bytes(b"a save under way")
    hours_ago = time.time() - 2 * 3600
    os.utime(dead, (hours_ago, hours_ago))
    assert build_index(table(200, 8), params, cache_dir=tmp_path).kind == "hnsw"
    assert not dead.exists() and live.exists() and (tmp_path / name).is_file()
