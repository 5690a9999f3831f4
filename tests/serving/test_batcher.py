"""RequestBatcher: concurrent requests share model passes, keep their order and Recommender."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from model.bundle import ModelBundle
from serving.batcher import RequestBatcher
from serving.index import build_index
from serving.recommender import Query, Recommender, Result
from tests.serving.bundles import make_bundle


class CountingRecommender(Recommender):
    """A real Recommender that records the size of every batch it answers."""

    def __init__(self, path: Path) -> None:
        bundle = ModelBundle.load(path)
        super().__init__(bundle, build_index(bundle.item_embeddings))
        self.batch_sizes: list[int] = []

    def recommend_batch(self, queries: Sequence[Query]) -> list[Result]:
        self.batch_sizes.append(len(queries))
        return super().recommend_batch(queries)


class BrokenRecommender(CountingRecommender):
    def recommend_batch(self, queries: Sequence[Query]) -> list[Result]:
        raise RuntimeError("index exploded")


def session(i: int) -> Query:
    """A distinct anonymous session per i (different histories, different k)."""
    return Query(items=[f"i{1 + i % 50}", f"i{2 + (7 * i) % 50}"], k=1 + i % 5)


def ids(result: Result) -> list[str]:
    return [item.item_id for item in result.items]


@pytest.fixture
def rec(tmp_path: Path) -> CountingRecommender:
    return CountingRecommender(make_bundle(tmp_path, "v1", publish_it=False))


def test_concurrent_requests_share_one_pass_and_get_their_own_answers(
    rec: CountingRecommender,
) -> None:
    queries = [session(i) for i in range(20)]

    async def run() -> list[list[Result]]:
        batcher = RequestBatcher(max_batch=256)
        try:
            return await asyncio.gather(*(batcher.recommend(rec, [q]) for q in queries))
        finally:
            batcher.close()

    answers = asyncio.run(run())
    assert rec.batch_sizes == [20]
    expected = [rec.recommend(q) for q in queries]
    assert [ids(a[0]) for a in answers] == [ids(e) for e in expected]
    assert [len(a[0].items) for a in answers] == [q.k for q in queries]


def test_batches_respect_max_batch_and_a_larger_request_is_answered_in_slices(
    rec: CountingRecommender,
) -> None:
    big = [session(i) for i in range(10)]

    async def run() -> list[list[Result]]:
        batcher = RequestBatcher(max_batch=4)
        try:
            singles = [batcher.recommend(rec, [session(i)]) for i in range(9)]
            return await asyncio.gather(*singles, batcher.recommend(rec, big))
        finally:
            batcher.close()

    answers = asyncio.run(run())
    assert rec.batch_sizes == [4, 4, 1, 4, 4, 2]  # before: [4, 4, 1, 10], one pass of 10
    assert [ids(r) for r in answers[-1]] == [ids(rec.recommend(q)) for q in big]
    assert [r.model_version for r in answers[-1]] == ["v1"] * 10
    assert [ids(a[0]) for a in answers[:-1]] == [ids(rec.recommend(session(i))) for i in range(9)]


def test_a_failing_slice_fails_the_whole_request(tmp_path: Path) -> None:
    broken = BrokenRecommender(make_bundle(tmp_path, "broken", publish_it=False))

    async def run() -> list[object]:
        batcher = RequestBatcher(max_batch=2)
        try:
            big = [session(i) for i in range(5)]
            return await asyncio.gather(batcher.recommend(broken, big), return_exceptions=True)
        finally:
            batcher.close()

    (failed,) = asyncio.run(run())
    assert isinstance(failed, RuntimeError) and "exploded" in str(failed)


def test_requests_of_different_models_never_share_a_batch(tmp_path: Path) -> None:
    old = CountingRecommender(make_bundle(tmp_path, "old", seed=0, publish_it=False))
    new = CountingRecommender(make_bundle(tmp_path, "new", seed=1, publish_it=False))
    order = [old, old, new, new, old]

    async def run() -> list[list[Result]]:
        batcher = RequestBatcher()
        try:
            return await asyncio.gather(
                *(batcher.recommend(r, [session(i)]) for i, r in enumerate(order))
            )
        finally:
            batcher.close()

    answers = asyncio.run(run())
    assert [a[0].model_version for a in answers] == ["old", "old", "new", "new", "old"]
    assert old.batch_sizes == [2, 1] and new.batch_sizes == [2]


def test_a_failing_pass_fails_its_requests_and_the_batcher_goes_on(
    tmp_path: Path, rec: CountingRecommender
) -> None:
    broken = BrokenRecommender(make_bundle(tmp_path / "b", "broken", publish_it=False))

    async def run() -> tuple[list[object], list[Result]]:
        batcher = RequestBatcher()
        try:
            failed = await asyncio.gather(
                batcher.recommend(broken, [session(0)]), return_exceptions=True
            )
            return failed, await batcher.recommend(rec, [session(1)])
        finally:
            batcher.close()

    failed, after = asyncio.run(run())
    assert isinstance(failed[0], RuntimeError) and "exploded" in str(failed[0])
    assert ids(after[0]) == ids(rec.recommend(session(1)))


def test_max_batch_and_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        RequestBatcher(max_batch=0)
    with pytest.raises(ValueError, match="threads"):
        RequestBatcher(threads=0)
