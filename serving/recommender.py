"""Turn requests into top-k items: history item_ids -> query tower -> index -> filter seen.

One `Recommender` serves one model version (bundle + index); the service swaps whole
Recommenders on reload, so a request always sees one consistent model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from model.bundle import ModelBundle
from serving.index_kinds import ItemIndex

HistoryLookup = Callable[[str], Sequence[str] | None]


class UnknownItemError(KeyError):
    """An item_id the model does not know (the API turns it into a 404)."""


@dataclass(frozen=True)
class Query:
    """One recommendation request.

    Attributes:
        user_id: A user whose history comes from the event store, or None (anonymous).
        items: Explicit history item_ids, oldest first; appended to a known user's history.
        k: Number of items wanted.
        exclude_seen: Drop items of the history from the results.

    """

    user_id: str | None = None
    items: Sequence[str] = ()
    k: int = 10
    exclude_seen: bool = True


@dataclass(frozen=True)
class ScoredItem:
    """One recommended item: its ids, score and title.

    The score is the model's: h . c (|h . c| for an absolute-softmax model), or the training
    count for popular items.
    """

    item_idx: int
    item_id: str
    score: float
    title: str | None


@dataclass
class Result:
    """Recommendations for one Query."""

    items: list[ScoredItem]
    strategy: str
    model_version: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Prepared:
    history: list[int]
    warnings: list[str]
    known_user: bool = False  # the event store has a history for the request's user_id


class Recommender:
    """Recommendations from one model bundle and its index."""

    def __init__(
        self, bundle: ModelBundle, index: ItemIndex, histories: HistoryLookup | None = None
    ) -> None:
        """Wrap a loaded bundle, its built index and the known users' histories."""
        self.bundle = bundle
        self.index = index
        # An absolute-softmax model predicts softmax(|h . c|): its best items may have h . c < 0.
        by_magnitude = bundle.manifest.ranks_by_magnitude
        self._search = index.search_by_magnitude if by_magnitude else index.search
        self._histories = histories or (lambda _user: None)
        pop = bundle.popularity[1:]
        # stable sort: equal counts keep item_idx order, so the fallback is deterministic
        self._popular_order = np.argsort(-pop, kind="stable") + 1

    @property
    def version(self) -> str:
        """The model version served."""
        return self.bundle.version

    def recommend(self, query: Query) -> Result:
        """Top-k for one request (see `recommend_batch`)."""
        return self.recommend_batch([query])[0]

    def recommend_batch(self, queries: Sequence[Query]) -> list[Result]:
        """Top-k for many requests with one query-tower pass and one index search.

        Requests with no usable history (an unknown user, or a known one whose items the
        model does not know yet, and no known items sent) get the most popular items, with a
        warning saying which.
        """
        prepared = [self._prepare(q) for q in queries]
        results: list[Result | None] = [None] * len(queries)
        model_rows = [i for i, p in enumerate(prepared) if p.history]
        if model_rows:
            ranked = self._model_topk(
                [prepared[i].history for i in model_rows],
                [queries[i] for i in model_rows],
            )
            for row, items in zip(model_rows, ranked, strict=True):
                results[row] = Result(items, "model", self.version, prepared[row].warnings)
        for i, (q, p) in enumerate(zip(queries, prepared, strict=True)):
            if results[i] is None:
                seen = set(p.history) if q.exclude_seen else set()
                p.warnings.append(_popular_reason(q, p.known_user))
                results[i] = Result(self.popular(q.k, seen), "popular", self.version, p.warnings)
        return [r for r in results if r is not None]

    def popular(self, k: int, exclude: set[int] | None = None) -> list[ScoredItem]:
        """The k most popular items (training counts), skipping `exclude` item_idx."""
        exclude = exclude or set()
        head = self._popular_order[: k + len(exclude)]
        chosen = [int(i) for i in head if int(i) not in exclude][:k]
        return [self._scored(i, float(self.bundle.popularity[i])) for i in chosen]

    def similar(self, item_id: str, k: int) -> list[ScoredItem]:
        """The k items nearest `item_id` by the model's score (h . c or |h . c|), itself excluded.

        Raises:
            UnknownItemError: the model does not know item_id.

        """
        idx = self.item_idx(item_id)
        query = self.bundle.item_embeddings[idx : idx + 1]
        ids, scores = self._search(query, k + 1)
        return self._collect(ids[0], scores[0], {idx}, k)

    def item_idx(self, item_id: str) -> int:
        """item_idx of an item_id. Raises UnknownItemError for an unknown id."""
        idx = self.bundle.id_to_idx.get(item_id)
        if idx is None:
            raise UnknownItemError(item_id)
        return idx

    def encode(self, histories: Sequence[Sequence[int]]) -> np.ndarray:
        """Query vectors for item_idx histories (`encode_histories` with this bundle)."""
        return encode_histories(self.bundle, histories)

    def _prepare(self, q: Query) -> _Prepared:
        """The usable history: the stored items, then the request's items, as item_idx.

        Stored items the model does not know (ingested after it was trained) are dropped
        silently: the caller never sent them. Unknown items the caller sent are named.
        """
        warnings: list[str] = []
        stored: list[int] = []
        known = None if q.user_id is None else self._histories(q.user_id)
        if known is not None:
            stored = [self.bundle.id_to_idx.get(i, 0) for i in known]
        elif q.user_id is not None:
            warnings.append(f"unknown user_id {q.user_id!r}: no stored history")
        sent = [self.bundle.id_to_idx.get(i, 0) for i in q.items]
        unknown = [i for i, idx in zip(q.items, sent, strict=True) if idx == 0]
        if unknown:
            shown = ", ".join(repr(u) for u in unknown[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            warnings.append(f"unknown item_id(s) dropped: {shown}{more}")
        return _Prepared([i for i in stored + sent if i > 0], warnings, known is not None)

    def _model_topk(
        self, histories: list[list[int]], queries: list[Query]
    ) -> list[list[ScoredItem]]:
        vectors = self.encode(histories)
        excludes = [
            set(h) if q.exclude_seen else set() for h, q in zip(histories, queries, strict=True)
        ]
        # over-fetch so that k items remain after dropping the seen ones
        fetch = max(q.k + len(ex) for q, ex in zip(queries, excludes, strict=True))
        ids, scores = self._search(vectors, fetch)
        return [
            self._collect(ids[r], scores[r], excludes[r], queries[r].k) for r in range(len(queries))
        ]

    def _collect(
        self, ids: np.ndarray, scores: np.ndarray, exclude: set[int], k: int
    ) -> list[ScoredItem]:
        out: list[ScoredItem] = []
        for idx, score in zip(ids.tolist(), scores.tolist(), strict=True):
            if idx > 0 and idx not in exclude:
                out.append(self._scored(idx, score))
                if len(out) == k:
                    break
        return out

    def _scored(self, idx: int, score: float) -> ScoredItem:
        return ScoredItem(idx, self.bundle.item_ids[idx], score, self.bundle.titles[idx])


def encode_histories(bundle: ModelBundle, histories: Sequence[Sequence[int]]) -> np.ndarray:
    """Query vectors for item_idx histories (oldest first).

    Args:
        bundle: The model.
        histories: B lists of item_idx; only the last L = max_len are used.

    Returns:
        float32 [B, d] (L2-normalised unless the model's `normalize` is false).

    """
    import torch

    length = bundle.manifest.max_len
    batch = np.zeros((len(histories), length), dtype=np.int64)
    for row, hist in enumerate(histories):
        tail = list(hist)[-length:]
        batch[row, length - len(tail) :] = tail  # left padding: most recent item last
    with torch.inference_mode():
        out = bundle.query_tower.encode(torch.from_numpy(batch))
    return out.float().numpy()


def user_queries(bundle: ModelBundle, histories: Sequence[Sequence[str]]) -> np.ndarray | None:
    """Query vectors [Q, d] of stored histories (item_ids), unknown items dropped; None if none."""
    known = [[bundle.id_to_idx[i] for i in h if i in bundle.id_to_idx] for h in histories]
    known = [h for h in known if h]
    return encode_histories(bundle, known) if known else None


def _popular_reason(q: Query, known_user: bool) -> str:
    if q.user_id is None and not q.items:
        return "no user_id and no items given: popular items"
    if known_user:  # e.g. right after POST /events with items newer than the model
        return "no usable history (the model knows none of the user's items): popular items"
    return "no usable history (unknown user and no known items): popular items"
