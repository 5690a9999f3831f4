"""Recommender and ModelService on planted bundles: known answers, fallbacks, atomic reload."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from data.errors import RecsysInputError
from data.ingest import ingest_files
from data.workspace import Workspace
from model.bundle import ModelBundle
from serving.index import IndexParams, build_index
from serving.recommender import Query, Recommender, UnknownItemError
from serving.service import ModelService
from tests.serving.bundles import PLANTED_HISTORY, POPULAR, make_bundle


@pytest.fixture
def rec(tmp_path: Path) -> Recommender:
    bundle = ModelBundle.load(make_bundle(tmp_path, "v1", num_items=60, target=40))
    histories = {"u1": ["i1", "i2", "i3"], "u2": ["gone"], "u3": ["new1", "i1", "i2", "new2", "i3"]}
    return Recommender(bundle, build_index(bundle.item_embeddings), histories.get)


def top(result: object) -> list[str]:
    return [i.item_id for i in result.items]  # type: ignore[attr-defined]


def test_planted_item_is_first_for_user_and_session(rec: Recommender) -> None:
    for query in (Query(user_id="u1", k=5), Query(items=PLANTED_HISTORY, k=5)):
        result = rec.recommend(query)
        assert result.strategy == "model" and top(result)[0] == "i40"
        assert result.items[0].score == pytest.approx(1.0, abs=1e-5)
        assert len(result.items) == 5 and result.warnings == []


def test_absolute_softmax_bundle_ranks_by_magnitude(tmp_path: Path) -> None:
    bundle = ModelBundle.load(make_bundle(tmp_path, "abs", target=40, score="abs_dot"))
    rec = Recommender(bundle, build_index(bundle.item_embeddings))
    assert bundle.manifest.ranks_by_magnitude
    result = rec.recommend(Query(items=PLANTED_HISTORY, k=5))
    assert top(result)[0] == "i40" and result.items[0].score == pytest.approx(1.0, abs=1e-5)
    as_dot = replace(bundle, manifest=bundle.manifest.model_copy(update={"score": "dot"}))
    signed = Recommender(as_dot, rec.index)
    assert top(signed.recommend(Query(items=PLANTED_HISTORY, k=59)))[-1] == "i40"


def test_absolute_softmax_similar_items_rank_by_magnitude(tmp_path: Path) -> None:
    bundle = ModelBundle.load(make_bundle(tmp_path, "abs", target=40, score="abs_dot"))
    emb = bundle.item_embeddings.copy()
    emb[2] = -emb[1]  # i2 exactly anti-aligned with i1: |h . c| = 1, the signed dot's last
    bundle = replace(bundle, item_embeddings=emb)
    rec = Recommender(bundle, build_index(emb))
    similar = rec.similar("i1", k=5)
    assert similar[0].item_id == "i2" and similar[0].score == pytest.approx(1.0, abs=1e-5)
    scores = [s.score for s in similar]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 0
    dot = bundle.manifest.model_copy(update={"score": "dot"})
    as_dot = Recommender(replace(bundle, manifest=dot), rec.index)
    assert "i2" not in [s.item_id for s in as_dot.similar("i1", k=5)]


def test_stored_items_the_model_lacks_are_dropped_without_a_warning(rec: Recommender) -> None:
    stored = rec.recommend(Query(user_id="u3", k=3))  # new1, new2 came after the model
    assert stored.warnings == [] and top(stored) == top(rec.recommend(Query(user_id="u1", k=3)))
    sent = rec.recommend(Query(user_id="u3", items=["zzz"], k=3))  # the caller's own unknown id
    assert sent.warnings == ["unknown item_id(s) dropped: 'zzz'"]


def test_exclude_seen_over_fetches_to_keep_k(rec: Recommender) -> None:
    history = [f"i{i}" for i in range(1, 51)]  # 50 of the 60 items seen
    kept = rec.recommend(Query(items=history, k=10))
    assert sorted(top(kept)) == sorted(f"i{i}" for i in range(51, 61))
    assert len(rec.recommend(Query(items=history, k=10, exclude_seen=False)).items) == 10


def test_popular_fallbacks(rec: Recommender) -> None:
    unknown = rec.recommend(Query(user_id="nobody", k=3))
    assert unknown.strategy == "popular" and top(unknown) == POPULAR
    assert unknown.items[0].score == 10_000.0
    only_unknown_items = rec.recommend(Query(user_id="u2", k=2))  # stored: newer than the model
    assert top(only_unknown_items) == POPULAR[:2]
    assert only_unknown_items.warnings == [
        "no usable history (the model knows none of the user's items): popular items"
    ]
    assert top(rec.recommend(Query(k=2))) == POPULAR[:2]
    assert rec.popular(2, exclude={7}) == rec.popular(3)[1:]


def test_popular_fallback_says_whether_the_user_is_known(rec: Recommender) -> None:
    # u2 is known, but its stored items came after the model (as right after POST /events):
    # before, it was told it was an unknown user
    known = rec.recommend(Query(user_id="u2", k=2))
    unknown = rec.recommend(Query(user_id="nobody", k=2))
    assert known.strategy == unknown.strategy == "popular"
    assert known.warnings == [
        "no usable history (the model knows none of the user's items): popular items"
    ]
    assert unknown.warnings == [
        "unknown user_id 'nobody': no stored history",
        "no usable history (unknown user and no known items): popular items",
    ]
    sent = rec.recommend(Query(user_id="u2", items=["zzz"], k=2))
    assert sent.warnings == [
        "unknown item_id(s) dropped: 'zzz'",
        "no usable history (the model knows none of the user's items): popular items",
    ]


def test_batch_equals_single_and_similar(rec: Recommender) -> None:
    queries = [Query(user_id="u1", k=4), Query(items=["i9", "x"], k=3), Query(k=2)]
    batch = rec.recommend_batch(queries)
    assert [top(r) for r in batch] == [top(rec.recommend(q)) for q in queries]
    assert batch[1].warnings == ["unknown item_id(s) dropped: 'x'"]
    near = rec.similar("i40", 5)
    assert len(near) == 5 and "i40" not in [i.item_id for i in near]
    with pytest.raises(UnknownItemError):
        rec.similar("zzz", 3)


def test_service_reload_swaps_and_keeps_old_on_broken_bundle(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    svc = ModelService(ws, IndexParams(kind="hnsw"))
    with pytest.raises(RecsysInputError, match="no model is published"):
        svc.reload()
    make_bundle(ws.models_dir, "v1", target=40)
    first = svc.reload()
    assert (first.changed, first.version, first.previous) == (True, "v1", None)
    assert svc.reload().changed is False
    old = svc.current
    broken = make_bundle(ws.models_dir, "v2", target=41, seed=1)
    (broken / "item_embeddings.npy").write_bytes(b"junk")
    with pytest.raises(RecsysInputError, match="item_embeddings.npy"):
        svc.reload()
    assert svc.current is old and "item_embeddings.npy" in (svc.last_error or "")
    make_bundle(ws.models_dir, "v3", target=42, seed=2)
    assert svc.reload().version == "v3" and svc.last_error is None
    assert top(svc.current.recommend(Query(items=PLANTED_HISTORY, k=1))) == ["i42"]
    assert old.version == "v1" and top(old.recommend(Query(items=PLANTED_HISTORY)))[0] == "i40"


def test_histories_come_from_the_event_store_in_time_order(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", target=40)
    csv = tmp_path / "events.csv"
    csv.write_text("user_id,item_id,timestamp\nu1,i3,30\nu1,i1,10\nu1,i2,20\n")
    ingest_files(ws, [csv])
    svc = ModelService(ws)
    svc.reload()
    assert list(svc.histories.get("u1") or []) == ["i1", "i2", "i3"]
    assert top(svc.current.recommend(Query(user_id="u1", k=1))) == ["i40"]
    csv.write_text("user_id,item_id,timestamp\nu9,i5,5\n")
    ingest_files(ws, [csv])
    assert svc.histories.refresh_if_changed() and svc.histories.get("u9") == ("i5",)


def test_an_approximate_index_is_checked_on_known_users_queries(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", target=40)
    csv = tmp_path / "events.csv"
    rows = [f"u{u},i{1 + (u * 7 + t) % 30},{t}" for u in range(40) for t in range(5)]
    csv.write_text("user_id,item_id,timestamp\n" + "\n".join(rows) + "\n")
    ingest_files(ws, [csv])
    svc = ModelService(ws, IndexParams(kind="hnsw"))
    svc.reload()
    index = svc.current.index.describe()
    assert (index["recall_query_source"], index["recall_queries"]) == ("users", 40)
    assert 0.0 < index["recall@10"] <= 1.0
    assert [len(h) for h in svc.histories.sample(3)] == [5, 5, 5]
    assert svc.histories.sample(3) == svc.histories.sample(3)  # fixed for a seed
