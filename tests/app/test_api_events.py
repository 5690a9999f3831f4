"""POST /events on the real server: stored as one part, reflected by the next /recommend."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest

from data.ingest import ingest_files
from data.store import PART_GLOB, read_events
from data.vocab import load_item_vocab, load_user_vocab
from data.workspace import Workspace
from tests.serving.bundles import PLANTED_HISTORY, make_bundle
from tests.serving.server import running_server

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Workspace]]:
    ws = Workspace(tmp_path_factory.mktemp("events") / "home")
    make_bundle(ws.models_dir, "v1")
    log = ws.root.parent / "events.csv"
    log.write_text("user_id,item_id,timestamp\nu1,i1,100\nu1,i2,200\nu1,i3,300\n")
    ingest_files(ws, [log])
    # polling every 60 s: what the test sees after a POST is the POST's doing, not the poller's
    with running_server(
        ws.root, {"RECSYS_ADMIN_TOKEN": TOKEN, "RECSYS_RELOAD_INTERVAL": "60"}
    ) as url:
        yield url, ws


@pytest.fixture(scope="module")
def api(served: tuple[str, Workspace]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=10) as client:
        yield client


def ids(body: dict) -> list[str]:
    return [i["item_id"] for i in body["items"]]


def post(api: httpx.Client, rows: list[tuple[object, object, object]]) -> httpx.Response:
    events = [{"user_id": u, "item_id": i, "timestamp": t} for u, i, t in rows]
    return api.post("/events", json={"events": events}, headers=AUTH)


def test_known_users_next_recommend_reflects_the_posted_events(api: httpx.Client) -> None:
    before = api.get("/recommend", params={"user_id": "u1", "k": 60}).json()
    assert ids(before)[0] == "i40" and "i4" in ids(before)
    resp = post(api, [("u1", "i4", 400), ("u1", "i5", 500)])  # merged before the answer:
    after = api.get("/recommend", params={"user_id": "u1", "k": 60}).json()  # so the next sees it
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["accepted"], body["rejected"], body["rejects"]) == (2, 0, [])
    assert body["events_total"] == 5
    assert not {"i4", "i5"} & set(ids(after))  # now seen, so excluded
    # the tower encoded the longer history: the answer is that history's, sent whole, and not
    # the old answer less the two items
    longer = [*PLANTED_HISTORY, "i4", "i5"]
    whole = api.post("/recommend", json={"items": longer, "k": 60}).json()
    assert after["items"] == whole["items"]
    assert ids(after) != [i for i in ids(before) if i not in ("i4", "i5")][: len(ids(after))]


def test_a_new_user_is_served_from_the_model_at_once(api: httpx.Client) -> None:
    cold = api.get("/recommend", params={"user_id": "fresh", "k": 3}).json()
    assert cold["strategy"] == "popular"
    rows = [("fresh", item, 10 * n) for n, item in enumerate([*PLANTED_HISTORY, "not-in-model"])]
    assert post(api, rows).json()["accepted"] == 4
    warm = api.get("/recommend", params={"user_id": "fresh", "k": 3}).json()
    # the stored item the model lacks is dropped silently; the planted history wins
    assert warm["strategy"] == "model" and ids(warm)[0] == "i40" and warm["warnings"] == []


def test_bad_rows_come_back_with_reasons_and_good_rows_are_kept(
    api: httpx.Client, served: tuple[str, Workspace]
) -> None:
    rows = [
        ("u7", "i9", 1),
        ("", "i9", 2),
        ("u7", "i8", "not a time"),
        ("u7", None, 3),
        ("u7", "i9", 1),
        ("u1", "i4", 400),  # posted by the first test
        ("u7", "i8", "2024-01-01T00:00:00Z"),
    ]
    resp = post(api, rows)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["accepted"], body["rejected"]) == (2, 5)
    assert [(r["index"], r["reason"]) for r in body["rejects"]] == [
        (1, "empty user_id"),
        (2, "unparseable timestamp"),
        (3, "null item_id"),
        (4, "duplicate within the input"),
        (5, "duplicate of a stored event"),
    ]
    assert body["rejects"][1] == {
        "index": 2,
        "user_id": "u7",
        "item_id": "i8",
        "timestamp": "not a time",
        "reason": "unparseable timestamp",
    }
    rejects = pl.read_parquet(served[1].rejects_dir / f"{body['ingest_id']}.parquet")
    assert set(rejects["source"]) == {"POST /events"} and rejects.height == 5
    seen = api.get("/recommend", params={"user_id": "u7", "k": 60}).json()
    assert seen["strategy"] == "model" and not {"i8", "i9"} & set(ids(seen))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": []}, "events"),
        ({"events": [{"user_id": "u", "item_id": "i"}]}, "events.0.timestamp"),
        ({"events": [{"user_id": 5, "item_id": "i", "timestamp": 1}]}, "events.0.user_id"),
        ({"events": [{"user_id": "u", "item_id": "i", "timestamp": 1.5}]}, "events.0.timestamp"),
        ({"events": [{"user_id": "u", "item_id": "i", "timestamp": 1, "x": 1}]}, "events.0.x"),
        ({"event": []}, "events"),
        ({"events": [{"user_id": "\ud800", "item_id": "i", "timestamp": 1}]}, "events.0.user_id"),
        (
            {"events": [{"user_id": "u", "item_id": "i", "timestamp": "\udfff"}]},
            "events.0.timestamp",
        ),
    ],
)
def test_malformed_bodies_are_422_naming_the_field(
    api: httpx.Client, body: object, field: str
) -> None:
    sent = json.dumps(body).encode()  # ASCII escapes: "\\ud800" as a JSON client sends it
    resp = api.post("/events", content=sent, headers={**AUTH, "content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert field in [e["field"] for e in resp.json()["errors"]]


def test_malformed_json_is_422(api: httpx.Client) -> None:
    resp = api.post("/events", content=b'{"events": [', headers=AUTH)
    assert resp.status_code == 422 and "malformed JSON" in resp.json()["detail"]


def test_batch_limits(api: httpx.Client) -> None:
    row = {"user_id": "u", "item_id": "i", "timestamp": 1}
    too_many = api.post("/events", json={"events": [row] * 10_001}, headers=AUTH)
    assert too_many.status_code == 422
    assert too_many.json()["errors"][0]["field"] == "events"
    huge = {"events": [{**row, "item_id": "x" * 200_000}] * 6}
    assert api.post("/events", json=huge, headers=AUTH).status_code == 413


def test_the_token_is_required_before_the_body_is_looked_at(api: httpx.Client) -> None:
    rows = {"events": [{"user_id": "intruder", "item_id": "i1", "timestamp": 1}]}
    missing = api.post("/events", json=rows)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    wrong = api.post("/events", json={"events": "junk"}, headers={"Authorization": "Bearer no"})
    assert wrong.status_code == 401 and wrong.json() == {"detail": "missing or wrong bearer token"}
    assert api.get("/recommend", params={"user_id": "intruder"}).json()["strategy"] == "popular"


def test_a_demo_home_is_refused_with_409(api: httpx.Client, served: tuple[str, Workspace]) -> None:
    marker = served[1].root / "ingested.json"
    marker.write_text('{"abc": "synthetic"}')
    try:
        resp = post(api, [("u1", "i9", 900)])
    finally:
        marker.unlink()
    assert resp.status_code == 409 and "synthetic demo events" in resp.json()["detail"]


def test_concurrent_posts_never_show_a_partial_part(
    api: httpx.Client, served: tuple[str, Workspace]
) -> None:
    """Four clients post while a reader lists and reads every part: all whole, seq gapless."""
    ws, stop, problems = served[1], threading.Event(), []
    sizes: dict[str, int] = {}

    def read_parts() -> None:
        while True:
            last_round = stop.is_set()  # one more pass once the clients are done
            for part in ws.events_dir.glob(PART_GLOB):
                try:
                    sizes[part.name] = pl.read_parquet(part).height
                except Exception as err:  # a half-written part would land here
                    problems.append(f"{part.name}: {err!r}")
            if last_round:
                return
            time.sleep(0.005)  # leave the server (one core on a loaded machine) some CPU

    def client(no: int) -> None:
        with httpx.Client(base_url=served[0], timeout=60) as own:
            for k in range(8):
                rows = [(f"c{no}", f"i{j}", 1000 * k + j) for j in range(1, 26)]
                try:
                    resp = post(own, rows)
                except Exception as err:  # a dead client thread would go unnoticed
                    problems.append(f"client {no}, post {k}: {err!r}")
                    continue
                if resp.status_code != 200 or resp.json()["accepted"] != 25:
                    problems.append(resp.text)

    reader = threading.Thread(target=read_parts)
    clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    reader.start()
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    stop.set()
    reader.join()
    assert not problems
    events = read_events(ws).collect()
    assert sorted(events["event_seq"]) == list(range(events.height))
    assert int(load_item_vocab(ws)["count"].sum()) == events.height
    assert {f"c{n}" for n in range(4)} <= set(load_user_vocab(ws)["user_id"])
    posted = [n for n in sizes if n.startswith("part-")]
    assert sum(1 for n in posted if sizes[n] == 25) >= 32  # every POST's part, read whole
    assert not list(ws.events_dir.glob(".tmp-*"))


def test_openapi_documents_the_route(api: httpx.Client) -> None:
    op = api.get("/openapi.json").json()["paths"]["/events"]["post"]
    assert {"200", "401", "404", "409", "413", "422"} <= set(op["responses"])


def test_disabled_without_a_token(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1")
    with running_server(ws.root, {"RECSYS_ADMIN_TOKEN": ""}) as url:
        resp = httpx.post(url + "/events", json={"events": []}, headers=AUTH)
    assert resp.status_code == 404 and "disabled" in resp.json()["detail"]
    assert not ws.events_dir.exists()


def test_a_non_ascii_token_is_accepted_as_curl_sends_it(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1")
    token = "t\u00f8k-\u00e9t\u00e9"
    sent = {"Authorization": b"Bearer " + token.encode()}  # UTF-8 bytes, as a shell sends them
    rows = {"events": [{"user_id": "u9", "item_id": "i1", "timestamp": 1}]}
    with running_server(ws.root, {"RECSYS_ADMIN_TOKEN": token}) as url:
        resp = httpx.post(url + "/events", json=rows, headers=sent)
        wrong = httpx.post(url + "/events", json=rows, headers={"Authorization": "Bearer tok"})
    assert resp.status_code == 200, resp.text
    assert wrong.status_code == 401
