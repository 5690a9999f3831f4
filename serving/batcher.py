"""Coalesce concurrent recommendation requests into one model pass, off the event loop.

Under load, many requests wait at once; answering them one by one costs one query-tower
call and one index search each, on the event loop, which then cannot parse the next
request meanwhile. `RequestBatcher` queues every request and a single worker answers all
the queued ones with one `Recommender.recommend_batch` call on a model thread. Batching is
opportunistic: a request that finds the worker idle starts it at once (no added wait), and
the requests that arrive while a batch runs form the next one. No pass holds more than
`max_batch` queries: a larger request is answered in slices.

A request is answered by the Recommender it read when it arrived (entries with different
Recommenders, around a reload, never share a batch), so a swap never fails or mixes one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from serving.recommender import Query, Recommender, Result
from serving.threads import limit_threads

T = TypeVar("T")


@dataclass
class _Entry:
    rec: Recommender
    queries: Sequence[Query]
    future: asyncio.Future[list[Result]]


class RequestBatcher:
    """Answer `recommend` calls in batches of up to `max_batch` queries on one model thread."""

    def __init__(self, max_batch: int = 256, threads: int | None = None) -> None:
        """Create an idle batcher; its thread starts with the first batch.

        Args:
            max_batch: Most queries answered in one `recommend_batch` call.
            threads: CPU threads the model thread gives torch and faiss (None: their default).

        """
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.max_batch = max_batch
        self._pending: deque[_Entry] = deque()
        self._worker: asyncio.Task[None] | None = None
        cap = None if threads is None else partial(limit_threads, threads)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="recsys-model", initializer=cap)

    async def recommend(self, rec: Recommender, queries: Sequence[Query]) -> list[Result]:
        """Results for `queries` (in order) from `rec`, batched with concurrent calls.

        More than max_batch queries (one /recommend/batch) are queued as consecutive slices
        of at most max_batch, so that no model pass is larger; their results are joined in
        order, and a failed slice fails the call.
        """
        loop = asyncio.get_running_loop()
        entries = [
            _Entry(rec, queries[start : start + self.max_batch], loop.create_future())
            for start in range(0, len(queries), self.max_batch)
        ]
        self._pending.extend(entries)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        results: list[Result] = []
        futures = (entry.future for entry in entries)
        for part in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(part, BaseException):  # every slice waited for: no error unread
                raise part
            results.extend(part)
        return results

    async def run_on_model_thread(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on the model thread (its thread cap; it queues behind running batches)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        """Stop the model thread once the batch running (if any) is done."""
        self._executor.shutdown(wait=True)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch = self._take()
            queries = [q for entry in batch for q in entry.queries]
            try:
                results = await loop.run_in_executor(
                    self._executor, batch[0].rec.recommend_batch, queries
                )
            except Exception as err:  # reported to every waiting request, never lost
                for entry in batch:
                    if not entry.future.done():
                        entry.future.set_exception(err)
                continue
            start = 0
            for entry in batch:
                end = start + len(entry.queries)
                if not entry.future.done():  # a cancelled request (client gone) is skipped
                    entry.future.set_result(results[start:end])
                start = end

    def _take(self) -> list[_Entry]:
        """The next batch: the longest queue prefix with one Recommender.

        At most max_batch queries: `recommend` queues no entry larger than that.
        """
        first = self._pending.popleft()
        batch, size = [first], len(first.queries)
        while self._pending:
            nxt = self._pending[0]
            if nxt.rec is not first.rec or size + len(nxt.queries) > self.max_batch:
                break
            batch.append(self._pending.popleft())
            size += len(nxt.queries)
        return batch
