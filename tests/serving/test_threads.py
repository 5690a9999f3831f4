"""The thread cap reaches the threads that do the work: the model thread and a reload's thread.

torch and faiss share one OpenMP runtime, whose thread count belongs to the calling thread,
so a cap set anywhere else (the event loop) would not apply; these tests read the count on
the working thread itself. Caps of 3 differ from any default on the 2-core CI machine.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import faiss
import pytest
import torch

from app.api.settings import Settings
from data.workspace import Workspace
from serving import service
from serving.batcher import RequestBatcher
from serving.index import build_index
from serving.recommender import Query
from serving.service import ModelService
from serving.threads import limit_threads
from tests.serving.bundles import make_bundle


def on_new_thread(fn: Callable[[], object]) -> object:
    """Run `fn` on a fresh thread and return its result."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


@pytest.fixture(autouse=True)
def restore_torch_threads() -> object:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_one_cap_for_torch_and_faiss() -> None:
    def capped() -> tuple[int, int]:
        limit_threads(3)
        return torch.get_num_threads(), faiss.omp_get_max_threads()

    assert on_new_thread(capped) == (3, 3)
    with pytest.raises(ValueError, match="threads"):
        limit_threads(0)


class ThreadProbe:
    """Stands in for a Recommender: answers each query with the OpenMP cap it ran under."""

    def recommend_batch(self, queries: Sequence[Query]) -> list[int]:
        return [faiss.omp_get_max_threads()] * len(queries)


def test_batcher_runs_the_model_under_its_cap() -> None:
    async def run() -> tuple[object, int]:
        batcher = RequestBatcher(threads=3)
        try:
            answers = await batcher.recommend(ThreadProbe(), [Query(items=["i1"])])  # type: ignore[arg-type]
            return answers, await batcher.run_on_model_thread(faiss.omp_get_max_threads)
        finally:
            batcher.close()

    assert asyncio.run(run()) == ([3], 3)


def test_reload_builds_under_the_cap_on_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1")
    svc = ModelService(ws, threads=3)
    caps_at_build: list[int] = []

    def recording_build(*args: object, **kwargs: object) -> object:
        caps_at_build.append(faiss.omp_get_max_threads())  # the cap while the index builds
        return build_index(*args, **kwargs)

    monkeypatch.setattr(service, "build_index", recording_build)

    def reload_and_read() -> tuple[bool, int]:
        return svc.reload().changed, faiss.omp_get_max_threads()

    assert on_new_thread(reload_and_read) == (True, 3)
    assert caps_at_build == [3]


def test_thread_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().threads == 1
    monkeypatch.setenv("RECSYS_THREADS", "4")
    assert Settings().threads == 4
    monkeypatch.setenv("RECSYS_THREADS", "0")
    with pytest.raises(ValueError, match="threads"):
        Settings()
