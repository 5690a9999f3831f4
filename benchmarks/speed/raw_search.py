"""`bench serving`'s raw search: the index alone, its latency and recall, the query tower's.

The index is the service's own class (`serving.index`), built and cached in the bundle as the
server will read it; recall@10 is measured against exact search (faiss brute force).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import options

HISTORY = 20  # items a load's session holds: the search over-fetches as many
K = 10  # items a request asks for
EF_SEARCH = (64, 128, 256, 512, 1024)  # HNSW search widths whose recall is reported


def raw_search(
    bundle_dir: Path, bodies: list[bytes], kind: str, ef_search: int, queries: np.ndarray | None
) -> dict[str, Any]:
    """Time `index.search` alone (k + 20 over-fetch, one query at a time) on the cached index.

    With its recall@10 against exact search, for `queries` (default: the bench's own sessions
    through the tower), at the server's efSearch and, for HNSW, at each of `EF_SEARCH`.
    """
    from model.bundle import ModelBundle
    from serving.index import IndexParams, build_index
    from serving.recommender import Recommender

    bundle = ModelBundle.load(bundle_dir)
    params = IndexParams(kind=kind, hnsw_ef_search=ef_search)
    index = build_index(bundle.item_embeddings, params, cache_dir=bundle_dir)
    rec = Recommender(bundle, index)
    hist = [[bundle.id_to_idx[i] for i in json.loads(b)["items"]] for b in bodies[:500]]
    if queries is None:
        queries = rec.encode(hist)
    times = options.search_seconds(index, queries, K + HISTORY)
    us = np.asarray(times) * 1e6
    return {
        "index": index.describe(),
        "recall_at_10_vs_exact": _recalls(index, bundle.item_embeddings[1:], queries, ef_search),
        "search_p50_us": round(float(np.percentile(us, 50)), 1),
        "search_p99_us": round(float(np.percentile(us, 99)), 1),
        "query_tower_encode_ms": _encode_ms(rec, hist),
    }


def _recalls(index: Any, rows: np.ndarray, queries: np.ndarray, ef_search: int) -> Any:
    """Recall@10 at the index's setting; for HNSW `{efSearch: recall}` over `EF_SEARCH` too."""
    from serving.index_recall import exact_top_k, recall_against

    exact = exact_top_k(rows, queries, K)
    if index.kind != "hnsw":
        return round(recall_against(index.search(queries, K)[0], exact), 4)
    served, out = index.params, {}
    for ef in sorted({ef_search, *EF_SEARCH}):
        index.params = dataclasses.replace(served, hnsw_ef_search=ef)
        out[str(ef)] = round(recall_against(index.search(queries, K)[0], exact), 4)
    index.params = served
    return out


def _encode_ms(rec: Any, hist: list[list[int]]) -> float:
    """Mean ms of the query tower over one session, on one thread as in the server."""
    import torch

    torch.set_num_threads(1)
    rec.encode(hist[:10])  # warm-up
    t0 = time.perf_counter()
    for h in hist[:200]:
        rec.encode([h])
    return round((time.perf_counter() - t0) / 200 * 1000, 3)
