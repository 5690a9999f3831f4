"""The item index a bundle is served with: its kind chosen, built or read from the bundle's cache.

Flat (exact) up to `FLAT_MAX_ITEMS` items, else HNSW, unless the settings name a kind
(`serving.index_kinds`). An approximate index's recall@10 against exact search is measured
when it is built and kept beside its cached file (`serving.index_recall`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from data.errors import RecsysInputError
from serving.index_kinds import (
    FLAT_MAX_ITEMS,
    FlatIndex,
    HNSWIndex,
    IndexParams,
    ItemIndex,
    IVFIndex,
    IVFPQIndex,
)
from serving.index_recall import RECALL_K, load_quality, measure, save_quality

log = logging.getLogger(__name__)

INDEX_KINDS = ("auto", "flat", "hnsw", "ivf", "ivfpq")
DEAD_TEMP_S = 3600  # a cache temp older than this is a killed writer's (a save takes seconds)
QuerySample = Callable[[], "np.ndarray | None"]  # real query vectors [Q, d] for the recall check


def resolve_kind(num_items: int, params: IndexParams) -> str:
    """The concrete kind ("auto": flat up to FLAT_MAX_ITEMS items, else hnsw)."""
    kind = params.kind
    if kind == "auto":
        kind = "flat" if num_items <= FLAT_MAX_ITEMS else "hnsw"
    if kind not in _CLASSES:
        raise RecsysInputError(f"index kind {kind!r} unknown; choose one of {INDEX_KINDS}")
    return kind


def cache_name(num_items: int, params: IndexParams) -> str | None:
    """File name of a cached build of an approximate index (None for flat: nothing to save)."""
    kind = resolve_kind(num_items, params)
    if kind == "hnsw":
        return f"index-hnsw-M{params.hnsw_m}-efc{params.hnsw_ef_construction}.faiss"
    if kind == "ivf":
        return f"index-ivf-nlist{params.ivf_nlist}.faiss"
    if kind == "ivfpq":
        return f"index-ivfpq-nlist{params.ivf_nlist}-m{params.pq_m}-b{params.pq_bits}.faiss"
    return None


def build_index(
    embeddings: np.ndarray,
    params: IndexParams | None = None,
    cache_dir: Path | None = None,
    queries: QuerySample | None = None,
) -> ItemIndex:
    """Build the index `params.kind` names ("auto": flat up to FLAT_MAX_ITEMS, else HNSW).

    Args:
        embeddings: float32 [n + 1, d], row 0 = padding.
        params: Kind and parameters; defaults to IndexParams().
        cache_dir: The bundle directory: an approximate index is read from a cached build
            there when present, else built and saved there (bundles never change, so a cache
            named by its build parameters cannot go stale; a read-only bundle is fine).
        queries: Gives real query vectors for the recall check of an approximate index,
            called only when recall is measured (a fresh build); item rows stand in without.

    Raises:
        RecsysInputError: an unknown kind, or IVF-PQ parameters that do not fit the table.

    """
    params = params or IndexParams()
    n = embeddings.shape[0] - 1
    cls = _CLASSES[resolve_kind(n, params)]
    name = cache_name(n, params)
    path = cache_dir / name if cache_dir is not None and name else None
    start = time.perf_counter()
    index = _read_cache(cls, embeddings, params, path)
    kept = load_quality(path) if index is not None and path is not None else None
    if index is not None:
        index.quality = _at_this_setting(index, kept)
    else:
        index = cls(embeddings, params)
        _write_cache(index, path)
    if cls is not FlatIndex and index.quality is None:
        # measured again at a new search setting: the build time is still the first build's
        seconds = (kept or {}).get("build_seconds", time.perf_counter() - start)
        index.quality = _measure_recall(index, embeddings, queries, seconds)
        if path is not None:
            _write_cache_note(path, index.quality)
    return index


def _read_cache(
    cls: type[ItemIndex], embeddings: np.ndarray, params: IndexParams, path: Path | None
) -> ItemIndex | None:
    if path is None or not path.is_file():
        return None
    try:
        # read_index already returns the concrete class; wrapping it again with
        # downcast_index would leave a wrapper whose owner is freed (garbage reads)
        return cls(embeddings, params, prebuilt=faiss.read_index(str(path)))
    except RuntimeError as err:
        log.warning("ignoring unreadable index cache %s: %s", path, err)
        return None


def _write_cache(index: ItemIndex, path: Path | None) -> None:
    if path is None:
        return
    try:
        _remove_dead_temps(path)
        index.save(path)
    except (OSError, RuntimeError) as err:
        log.info("index cache not written (%s): %s", path, err)


def _remove_dead_temps(path: Path) -> None:
    """Delete the temps of `path` that killed writers left (older than DEAD_TEMP_S)."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        with contextlib.suppress(FileNotFoundError):  # another writer's, renamed meanwhile
            if time.time() - tmp.stat().st_mtime > DEAD_TEMP_S:
                tmp.unlink(missing_ok=True)


def _at_this_setting(index: ItemIndex, quality: dict[str, Any] | None) -> dict[str, Any] | None:
    """The recall kept beside a cached index, if measured at today's search parameters."""
    if quality is None or quality.get("recall_search", "") != index.search_setting():
        return None  # measured again: efSearch or nprobe changed since (or never measured)
    return quality


def _measure_recall(
    index: ItemIndex, embeddings: np.ndarray, queries: QuerySample | None, seconds: float
) -> dict[str, Any]:
    quality = measure(index, embeddings, queries() if queries else None, seconds)
    if index.search_setting():
        quality["recall_search"] = index.search_setting()
    log.info(
        "%s index over %d items: recall@%d %.3f against exact search (%d %s queries), %.1f s",
        index.kind, index.size, RECALL_K, quality[f"recall@{RECALL_K}"],
        quality["recall_queries"], quality["recall_query_source"], seconds,
    )  # fmt: skip
    return quality


def _write_cache_note(path: Path, quality: dict[str, Any]) -> None:
    try:
        save_quality(path, quality)
    except OSError as err:
        log.info("index recall not written beside %s: %s", path, err)


_CLASSES: dict[str, type[ItemIndex]] = {
    "flat": FlatIndex,
    "hnsw": HNSWIndex,
    "ivf": IVFIndex,
    "ivfpq": IVFPQIndex,
}
