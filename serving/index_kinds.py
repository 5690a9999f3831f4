"""The index kinds: exact `FlatIndex`; approximate `HNSWIndex`, `IVFIndex` and `IVFPQIndex`.

All search by inner product in item_idx space: row 0 of the embedding table (padding) is never
indexed, so faiss position p holds item_idx p + 1 and 0 is never returned. IVF-PQ keeps
pq_m * pq_bits / 8 bytes an item instead of 4 d, for catalogues whose vectors do not fit in
memory. `serving.index.build_index` chooses, caches and checks them.
"""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from data.errors import RecsysInputError

FLAT_MAX_ITEMS = 200_000


@dataclass(frozen=True)
class IndexParams:
    """Index choice and its build/search parameters.

    Attributes:
        kind: auto (flat up to FLAT_MAX_ITEMS items, else hnsw), flat, hnsw, ivf or ivfpq.
        hnsw_m: HNSW graph degree M.
        hnsw_ef_construction: HNSW build-time beam width.
        hnsw_ef_search: HNSW search-time beam width (raised to k when k is larger).
        ivf_nlist: IVF number of clusters (0 = about 4 * sqrt(n)).
        ivf_nprobe: IVF clusters visited per query (also IVF-PQ's).
        pq_m: IVF-PQ sub-quantizers, a divisor of d (0 = the largest divisor up to d / 4).
        pq_bits: Bits of each sub-quantizer's code (lowered to log2(n) for tiny catalogues).

    """

    kind: str = "auto"
    hnsw_m: int = 32
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 64
    ivf_nlist: int = 0
    ivf_nprobe: int = 16
    pq_m: int = 0
    pq_bits: int = 8


class ItemIndex(ABC):
    """Top-k inner-product search over items 1..n.

    Attributes:
        kind: The index kind name.
        size: Number of indexed items n.
        dim: Embedding dimension d.
        quality: recall@10 against exact search and build time, for approximate indexes
            built by `build_index` (None for flat, which is exact).

    """

    kind = "base"
    quality: dict[str, Any] | None = None

    def __init__(self, embeddings: np.ndarray, params: IndexParams, prebuilt: Any = None) -> None:
        """Build the index from the full table [n + 1, d] (row 0 = padding, skipped).

        Args:
            embeddings: float32 [n + 1, d].
            params: Build and search parameters.
            prebuilt: A faiss index already built from these rows (read from a cache).

        """
        if embeddings.ndim != 2 or embeddings.shape[0] < 2:
            raise RecsysInputError("the index needs an embedding table [n + 1, d] with n >= 1")
        self.size = int(embeddings.shape[0] - 1)
        self.dim = int(embeddings.shape[1])
        self.params = params
        if prebuilt is not None and prebuilt.ntotal == self.size and prebuilt.d == self.dim:
            self._faiss = prebuilt
            self.nlist = int(getattr(prebuilt, "nlist", 0))
        else:
            self._faiss = self._build(np.ascontiguousarray(embeddings[1:], dtype=np.float32))

    def save(self, path: Path) -> None:
        """Write the faiss index to `path` atomically (a unique temp file, removed on failure)."""
        # not the pid: replicas sharing a bundle folder are all PID 1 in their containers
        tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
        try:
            faiss.write_index(self._faiss, str(tmp))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @abstractmethod
    def _build(self, vectors: np.ndarray) -> Any:
        """Create and fill the faiss index from the item rows [n, d]."""

    def _prepare_search(self, k: int) -> Any:
        """Faiss SearchParameters for this k (None = index defaults)."""
        return None

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k items by inner product.

        Args:
            queries: float32 [Q, d].
            k: Results per query; clamped to n.

        Returns:
            ids: int64 [Q, k'] item_idx (k' = min(k, n)), best first; -1 marks a missing
                result (approximate indexes may find fewer than k), never 0.
            scores: float32 [Q, k'] inner products (-inf where ids is -1).

        """
        k = max(1, min(int(k), self.size))
        q = self._queries(queries)
        params = self._prepare_search(k)
        if params is None:
            scores, pos = self._faiss.search(q, k)
        else:
            scores, pos = self._faiss.search(q, k, params=params)
            while (pos < 0).any() and self._widen(params):  # too few candidates were visited
                scores, pos = self._faiss.search(q, k, params=params)
        missing = pos < 0
        ids = np.where(missing, -1, pos + 1).astype(np.int64)
        scores = np.where(missing, -np.inf, scores).astype(np.float32)
        return ids, scores

    def search_by_magnitude(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k items by |q . c|, for models trained with the absolute softmax.

        The k best of q . c and the k best of -(q . c) hold the k best of |q . c|; they are
        merged by magnitude (an item found by both searches is kept once).

        Args:
            queries: float32 [Q, d].
            k: Results per query; clamped to n.

        Returns:
            As `search`, with scores |q . c|.

        """
        q = self._queries(queries)
        both_ids, both_scores = self.search(np.concatenate([q, -q]), k)  # one call, [2Q, k]
        ids = np.concatenate([both_ids[: len(q)], both_ids[len(q) :]], axis=1)  # [Q, 2k]
        scores = np.concatenate([both_scores[: len(q)], both_scores[len(q) :]], axis=1)
        scores = np.where(ids < 0, -np.inf, np.abs(scores))
        width = both_ids.shape[1]
        out_ids = np.full((len(q), width), -1, dtype=np.int64)
        out_scores = np.full((len(q), width), -np.inf, dtype=np.float32)
        for row in range(len(q)):
            order = np.argsort(-scores[row], kind="stable")
            _, first = np.unique(ids[row, order], return_index=True)
            keep = order[np.sort(first)]
            keep = keep[ids[row, keep] >= 0][:width]
            out_ids[row, : len(keep)] = ids[row, keep]
            out_scores[row, : len(keep)] = scores[row, keep]
        return out_ids, out_scores

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        """`queries` float32 [Q, d], contiguous; ValueError for any other shape (no reshape)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must be [Q, {self.dim}], got shape {q.shape}")
        return q

    def _widen(self, params: Any) -> bool:
        """Make `params` visit more of the index; False when it visits all it can already."""
        return False

    def search_setting(self) -> str:
        """The search-time parameters recall depends on, as text (`efSearch=64`); "" if none."""
        return ""

    def describe(self) -> dict[str, Any]:
        """Kind, size, parameters and measured recall (for logs, /ready and benchmarks)."""
        return {"kind": self.kind, "size": self.size, "dim": self.dim, **(self.quality or {})}


class FlatIndex(ItemIndex):
    """Exact inner-product search (faiss IndexFlatIP)."""

    kind = "flat"

    def _build(self, vectors: np.ndarray) -> Any:
        index = faiss.IndexFlatIP(self.dim)
        index.add(vectors)
        return index


class HNSWIndex(ItemIndex):
    """Approximate search on an HNSW graph (faiss IndexHNSWFlat, inner product)."""

    kind = "hnsw"

    def _build(self, vectors: np.ndarray) -> Any:
        index = faiss.IndexHNSWFlat(self.dim, self.params.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.params.hnsw_ef_construction
        index.add(vectors)
        return index

    def _prepare_search(self, k: int) -> Any:
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        params.efSearch = max(self.params.hnsw_ef_search, k)
        return params

    def search_setting(self) -> str:  # noqa: D102
        return f"efSearch={self.params.hnsw_ef_search}"

    def describe(self) -> dict[str, Any]:
        """Kind, size and HNSW parameters."""
        p = self.params
        return super().describe() | {
            "M": p.hnsw_m,
            "efConstruction": p.hnsw_ef_construction,
            "efSearch": p.hnsw_ef_search,
        }


class IVFIndex(ItemIndex):
    """Approximate search over k-means cells (faiss IndexIVFFlat, inner product)."""

    kind = "ivf"

    def _build(self, vectors: np.ndarray) -> Any:
        nlist = self.params.ivf_nlist or max(1, int(4 * np.sqrt(len(vectors))))
        self.nlist = min(nlist, len(vectors))
        self._quantizer = faiss.IndexFlatIP(self.dim)  # faiss does not own it from Python
        index = self._new_ivf(self._quantizer)
        # k-means on a sample is enough for the centres and keeps big builds fast
        rng = np.random.default_rng(0)
        index.train(vectors[rng.permutation(len(vectors))[: self._training_rows()]])
        index.add(vectors)
        return index

    def _new_ivf(self, quantizer: Any) -> Any:
        return faiss.IndexIVFFlat(quantizer, self.dim, self.nlist, faiss.METRIC_INNER_PRODUCT)

    def _training_rows(self) -> int:
        return self.nlist * 64

    def _prepare_search(self, k: int) -> Any:
        params = faiss.SearchParametersIVF()
        # cells hold about size / nlist items each: visit enough of them for k results
        enough = -(-2 * k * self.nlist // max(self.size, 1))
        params.nprobe = min(max(self.params.ivf_nprobe, enough), self.nlist)
        return params

    def _widen(self, params: Any) -> bool:
        """Twice the cells (a query near small cells found fewer than k); False at nlist."""
        if params.nprobe >= self.nlist:
            return False
        params.nprobe = min(2 * params.nprobe, self.nlist)
        return True

    def search_setting(self) -> str:  # noqa: D102
        return f"nprobe={self.params.ivf_nprobe}"

    def describe(self) -> dict[str, Any]:
        """Kind, size and IVF parameters."""
        return super().describe() | {"nlist": self.nlist, "nprobe": self.params.ivf_nprobe}


class IVFPQIndex(IVFIndex):
    """IVF over product-quantised codes (faiss IndexIVFPQ, inner product): a compact index."""

    kind = "ivfpq"

    def _new_ivf(self, quantizer: Any) -> Any:
        m = pq_subquantizers(self.dim, self.params.pq_m)
        bits = min(self.params.pq_bits, max(1, int(np.log2(self.size))))
        return faiss.IndexIVFPQ(
            quantizer, self.dim, self.nlist, m, bits, faiss.METRIC_INNER_PRODUCT
        )

    def _training_rows(self) -> int:
        return max(super()._training_rows(), 64 << self.params.pq_bits)  # k-means of each code

    def describe(self) -> dict[str, Any]:
        """Kind, size, IVF and PQ parameters, bytes an item."""
        pq, code_bytes = self._faiss.pq, int(self._faiss.code_size)
        return super().describe() | {
            "pq_m": int(pq.M), "pq_bits": int(pq.nbits), "bytes_per_item": code_bytes
        }  # fmt: skip


def pq_subquantizers(dim: int, asked: int) -> int:
    """`asked` when it divides `dim`; 0 = the largest divisor of `dim` up to dim / 4.

    Raises:
        RecsysInputError: `asked` does not divide `dim`.

    """
    if asked:
        if dim % asked:
            raise RecsysInputError(f"pq_m = {asked} must divide the embedding size {dim}")
        return asked
    return max(m for m in range(1, max(1, dim // 4) + 1) if dim % m == 0)
