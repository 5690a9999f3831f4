"""How good an approximate index is: recall@10 against exact search, measured at build time.

An approximate index (HNSW, IVF, IVF-PQ) trades recall for speed and memory, so its recall is
measured once, when it is built: the share of the exact top 10 (inner product over every item,
faiss brute force) that the index returns, over up to `RECALL_QUERIES` queries. The service
passes real query vectors (a sample of known users' histories through the query tower); with
none, a sample of item rows stands in (the `/similar` workload). The figure is kept beside the
cached index in the bundle (`<index file>.json`), read back with it, and shown by `/ready`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

import faiss
import numpy as np

from data.store import atomic_write

RECALL_K = 10
RECALL_QUERIES = 1000


class Searchable(Protocol):
    """What the measurement needs of an index: `search` returning item_idx (row p + 1)."""

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top k: item_idx int64 [Q, k] (-1 where missing) and scores [Q, k]."""
        ...


def recall_at_k(index: Searchable, rows: np.ndarray, queries: np.ndarray, k: int) -> float:
    """Mean share of each query's exact top k that `index.search` returns.

    Args:
        index: The approximate index over `rows`.
        rows: float32 [n, d] item rows (without the padding row).
        queries: float32 [Q, d].
        k: Cut-off, at most n.

    """
    q = np.ascontiguousarray(queries, dtype=np.float32)
    approx, _ = index.search(q, k)  # item_idx = position + 1, -1 where missing
    return recall_against(approx, exact_top_k(rows, q, k))


def exact_top_k(rows: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """int64 `[Q, k]` row positions of each query's exact top k by inner product (brute force)."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    _, exact = faiss.knn(q, rows, k, metric=faiss.METRIC_INNER_PRODUCT)
    return np.asarray(exact)


def recall_against(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of `exact` (row positions `[Q, k]`) in `found` (item_idx = position + 1)."""
    hits = [len(set(a) & set(e)) for a, e in zip(found.tolist(), (exact + 1).tolist(), strict=True)]
    return float(np.mean(hits)) / exact.shape[1]


def measure(
    index: Searchable, embeddings: np.ndarray, queries: np.ndarray | None, build_seconds: float
) -> dict[str, Any]:
    """The quality record of a freshly built index (`queries` None or empty: item rows).

    Args:
        index: The built index.
        embeddings: float32 [n + 1, d], row 0 = padding.
        queries: float32 [Q, d] real query vectors, or None.
        build_seconds: Wall seconds the build took.

    """
    rows = np.ascontiguousarray(embeddings[1:], dtype=np.float32)
    source = "users"
    if queries is None or len(queries) == 0:
        pick = np.random.default_rng(0).permutation(len(rows))[:RECALL_QUERIES]
        queries, source = rows[np.sort(pick)], "items"
    queries = queries[:RECALL_QUERIES]
    k = min(RECALL_K, len(rows))
    start = time.perf_counter()
    recall = recall_at_k(index, rows, queries, k)
    return {
        f"recall@{RECALL_K}": round(recall, 4),
        "recall_queries": len(queries),
        "recall_query_source": source,
        "recall_seconds": round(time.perf_counter() - start, 2),
        "build_seconds": round(build_seconds, 2),
    }


def quality_path(index_file: Path) -> Path:
    """The quality record kept beside a cached index file."""
    return index_file.with_name(index_file.name + ".json")


def save_quality(index_file: Path, quality: dict[str, Any]) -> None:
    """Write the record beside `index_file`, atomically."""
    text = json.dumps(quality, indent=1) + "\n"
    atomic_write(quality_path(index_file), lambda tmp: tmp.write_text(text))


def load_quality(index_file: Path) -> dict[str, Any] | None:
    """The record beside `index_file`; None when missing or unreadable (it is measured again)."""
    try:
        quality = json.loads(quality_path(index_file).read_text())
    except (OSError, ValueError):
        return None
    return quality if isinstance(quality, dict) else None
