"""Every endpoint of the real server (uvicorn subprocess) over a planted bundle."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from data.ingest import ingest_files
from data.workspace import Workspace
from tests.serving.bundles import PLANTED_HISTORY, POPULAR, make_bundle
from tests.serving.server import running_server

TOKEN = "s3cret"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    home = tmp_path_factory.mktemp("api") / "home"
    ws = Workspace(home)
    make_bundle(ws.models_dir, "v1")
    events = home.parent / "events.csv"
    # u1 saw the planted history (in time order); u2 saw only items the model lacks; u3 saw
    # u1's items around two the model lacks (ingested after it was trained)
    events.write_text(
        "user_id,item_id,timestamp\nu1,i2,200\nu1,i1,100\nu1,i3,300\nu2,new-a,100\nu2,new-b,200\n"
        "u3,new-a,50\nu3,i1,100\nu3,i2,200\nu3,new-c,250\nu3,i3,300\n"
    )
    ingest_files(ws, [events])
    with running_server(home, {"RECSYS_ADMIN_TOKEN": TOKEN}) as url:
        yield url, home


@pytest.fixture(scope="module")
def api(served: tuple[str, Path]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=10) as client:
        yield client


def ids(body: dict) -> list[str]:
    return [i["item_id"] for i in body["items"]]


def test_health_and_ready(api: httpx.Client) -> None:
    assert api.get("/health").json() == {"status": "ok", "version": version("recsys")}
    ready = api.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["model_version"] == "v1"
    assert ready.json()["index"] == {"kind": "flat", "size": 60, "dim": 16}


def test_known_user_gets_the_planted_item(api: httpx.Client) -> None:
    body = api.get("/recommend", params={"user_id": "u1", "k": 5}).json()
    assert body["strategy"] == "model" and body["model_version"] == "v1"
    assert ids(body)[0] == "i40"
    assert body["items"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert body["items"][0]["title"] == "Title 40"
    assert "title" not in body["items"][1] or body["items"][1]["title"]
    assert len(body["items"]) == 5 and body["warnings"] == []
    assert not set(ids(body)) & set(PLANTED_HISTORY)  # exclude_seen by default


def test_exclude_seen_false_allows_history_items(api: httpx.Client) -> None:
    seen = api.post("/recommend", json={"items": PLANTED_HISTORY, "k": 60, "exclude_seen": False})
    kept = api.post("/recommend", json={"items": PLANTED_HISTORY, "k": 60})
    assert set(PLANTED_HISTORY) <= set(ids(seen.json()))
    assert len(ids(seen.json())) == 60 and len(ids(kept.json())) == 57
    assert not set(PLANTED_HISTORY) & set(ids(kept.json()))


def test_anonymous_session_and_unknown_items(api: httpx.Client) -> None:
    body = api.post("/recommend", json={"items": [*PLANTED_HISTORY, "nope"], "k": 3}).json()
    # the unknown item is dropped (named in warnings) and the planted history still wins
    assert ids(body)[0] == "i40"
    assert body["warnings"] == ["unknown item_id(s) dropped: 'nope'"]


def test_get_with_repeated_items(api: httpx.Client) -> None:
    params = [("items", i) for i in PLANTED_HISTORY] + [("k", "2")]
    body = api.get("/recommend", params=params).json()
    assert ids(body)[0] == "i40" and len(body["items"]) == 2


def test_unknown_user_gets_popular_with_warning(api: httpx.Client) -> None:
    body = api.get("/recommend", params={"user_id": "stranger", "k": 3}).json()
    assert body["strategy"] == "popular" and ids(body) == POPULAR
    assert any("unknown user_id 'stranger'" in w for w in body["warnings"])
    assert any("popular" in w for w in body["warnings"])


def test_user_with_only_unknown_items_and_empty_body(api: httpx.Client) -> None:
    body = api.post("/recommend", json={"user_id": "u2", "k": 2}).json()
    assert body["strategy"] == "popular" and ids(body) == POPULAR[:2]
    # u2's stored items came after the model: dropped silently, the caller never sent them
    assert body["warnings"] == [
        "no usable history (the model knows none of the user's items): popular items"
    ]
    anon = api.post("/recommend", json={}).json()
    assert anon["strategy"] == "popular" and len(anon["items"]) == 10


def test_stored_items_the_model_lacks_are_dropped_silently(api: httpx.Client) -> None:
    mixed = api.post("/recommend", json={"user_id": "u3", "k": 3}).json()
    assert mixed["strategy"] == "model" and mixed["warnings"] == []
    assert ids(mixed) == ids(api.post("/recommend", json={"user_id": "u1", "k": 3}).json())
    sent = api.post("/recommend", json={"user_id": "u3", "items": ["new-a", "zzz"], "k": 3})
    assert sent.json()["warnings"] == ["unknown item_id(s) dropped: 'new-a', 'zzz'"]


def test_known_user_plus_items_appends(api: httpx.Client) -> None:
    alone = api.post("/recommend", json={"user_id": "u1", "k": 5}).json()
    more = api.post("/recommend", json={"user_id": "u1", "items": ["i40"], "k": 5}).json()
    assert "i40" not in ids(more)  # appended to the history, so now seen
    assert ids(alone) != ids(more)
    # the stored history (i1, i2, i3 in time order) then the request's items: as if sent whole
    whole = api.post("/recommend", json={"items": [*PLANTED_HISTORY, "i40"], "k": 5}).json()
    instead = api.post("/recommend", json={"items": ["i40"], "k": 5}).json()
    assert more["items"] == whole["items"] != instead["items"]
    assert not {*PLANTED_HISTORY, "i40"} & set(ids(more))


def test_batch_matches_single_requests(api: httpx.Client) -> None:
    reqs = [{"user_id": "u1", "k": 4}, {"items": ["i7"], "k": 3}, {"user_id": "zz", "k": 2}]
    body = api.post("/recommend/batch", json={"requests": reqs}).json()
    assert body["model_version"] == "v1" and len(body["results"]) == 3
    for req, res in zip(reqs, body["results"], strict=True):
        assert res == api.post("/recommend", json=req).json()


def test_similar_and_items(api: httpx.Client) -> None:
    sim = api.get("/similar/i40", params={"k": 4}).json()
    assert sim["item_id"] == "i40" and sim["model_version"] == "v1"
    assert len(sim["items"]) == 4 and "i40" not in ids(sim)
    assert sim["items"][0]["score"] >= sim["items"][-1]["score"]
    item = api.get("/items/i7").json()
    assert item == {"item_id": "i7", "title": None, "popularity": 10000, "model_version": "v1"}
    assert api.get("/items/i40").json()["title"] == "Title 40"


@pytest.mark.parametrize("path", ["/items/nope", "/similar/nope"])
def test_unknown_item_is_404_with_message(api: httpx.Client, path: str) -> None:
    resp = api.get(path)
    assert resp.status_code == 404
    assert resp.json() == {"detail": "unknown item_id 'nope' in the served model"}


def test_metrics_count_routes_and_model(api: httpx.Client) -> None:
    api.get("/items/i7")
    api.get("/items/nope")
    text = api.get("/metrics").text
    assert 'recsys_model_info{version="v1"} 1.0' in text
    assert 'recsys_index_items{kind="flat"} 60.0' in text
    assert 'route="/items/{item_id}",status="200"' in text
    assert 'route="/items/{item_id}",status="404"' in text
    assert "recsys_http_request_duration_seconds_bucket" in text


def test_admin_reload_requires_the_token(api: httpx.Client) -> None:
    assert api.post("/admin/reload").status_code == 401
    wrong = api.post("/admin/reload", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    non_ascii = {"Authorization": "Bearer caf\xe9".encode("latin-1")}
    latin1 = api.post("/admin/reload", headers=non_ascii)
    assert latin1.status_code == 401
    ok = api.post("/admin/reload", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert ok.json()["changed"] is False and ok.json()["model_version"] == "v1"


def test_openapi_lists_every_endpoint(api: httpx.Client) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    for path in [
        "/recommend",
        "/recommend/batch",
        "/similar/{item_id}",
        "/items/{item_id}",
        "/health",
        "/ready",
        "/metrics",
        "/admin/reload",
    ]:
        assert path in paths


def test_request_log_has_latency(api: httpx.Client, served: tuple[str, Path]) -> None:
    api.get("/items/i9")
    pattern = re.compile(r"GET /items/i9 200 \d+\.\dms")
    deadline = time.monotonic() + 5  # the line is written just after the response is sent
    while not pattern.search(log := (served[1] / "server.log").read_text()):
        assert time.monotonic() < deadline, log[-500:]
        time.sleep(0.05)


def test_an_approximate_index_is_ready_and_ids_with_a_slash_are_reachable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_bundle(Workspace(home).models_dir, "v1", num_items=3000, id_prefix="cat/")
    with running_server(home, {"RECSYS_INDEX": "hnsw"}) as url, httpx.Client(base_url=url) as api:
        ready = api.get("/ready")  # was a 500: the index's float figures failed the schema
        assert ready.status_code == 200, ready.text
        index = ready.json()["index"]
        assert index["kind"] == "hnsw" and isinstance(index["build_seconds"], float)
        assert 0.0 < index["recall@10"] <= 1.0
        item = api.get("/items/cat%2F5")  # the path converter keeps the encoded slash's id
        assert item.status_code == 200 and item.json()["item_id"] == "cat/5", item.text
        similar = api.get("/similar/cat%2F5", params={"k": 3})
        assert similar.status_code == 200 and len(similar.json()["items"]) == 3
        assert api.get("/items/cat%2Fnope").json()["detail"].startswith("unknown item_id")
