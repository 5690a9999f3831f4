"""Bad input against the real server: 422 naming the field, 413 for big bodies, never a 5xx."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.api.settings import Settings
from data.workspace import Workspace
from serving.service import ModelService
from tests.serving.bundles import make_bundle
from tests.serving.server import running_server

LIMIT = 20_000


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    home = tmp_path_factory.mktemp("api-errors") / "home"
    make_bundle(Workspace(home).models_dir, "v1")
    env = {"RECSYS_MAX_BODY_BYTES": str(LIMIT)}
    with running_server(home, env) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def check_422(resp: httpx.Response, field: str) -> None:
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert field in [e["field"] for e in body["errors"]], body
    assert body["detail"].startswith(field) or f"; {field}" in body["detail"]


@pytest.mark.parametrize("k", ["0", "1001", "-3", "abc", "2.5", ""])
def test_get_recommend_bad_k(api: httpx.Client, k: str) -> None:
    check_422(api.get("/recommend", params={"user_id": "u", "k": k}), "k")


@pytest.mark.parametrize("item", ["", "x" * 257])
def test_get_recommend_items_keep_the_id_limits(api: httpx.Client, item: str) -> None:
    check_422(api.get("/recommend", params={"items": ["i1", item]}), "items.1")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"k": 0}, "k"),
        ({"k": 1001}, "k"),
        ({"k": "10"}, "k"),  # strict: JSON types only
        ({"k": 2.5}, "k"),
        ({"k": True}, "k"),
        ({"items": "i1"}, "items"),
        ({"items": ["i1", 7]}, "items.1"),
        ({"items": [""]}, "items.0"),
        ({"items": ["i1"] * 1001}, "items"),  # longer than the history limit
        ({"user_id": 123}, "user_id"),
        ({"user_id": ""}, "user_id"),
        ({"user_id": "x" * 300}, "user_id"),
        ({"exclude_seen": "yes"}, "exclude_seen"),
        ({"item": ["i1"]}, "item"),  # unknown field (a typo) is not silently ignored
        ([1, 2], "body"),
        (None, "body"),
        ("text", "body"),
    ],
)
def test_post_recommend_bad_body(api: httpx.Client, body: object, field: str) -> None:
    check_422(api.post("/recommend", content=json.dumps(body)), field)


@pytest.mark.parametrize("raw", [b'{"k": ', b"{'k': 1}", b"\xff\xfe\x00garbage", b"{}}"])
def test_malformed_json(api: httpx.Client, raw: bytes) -> None:
    resp = api.post("/recommend", content=raw, headers={"content-type": "application/json"})
    check_422(resp, "body")
    assert "malformed JSON" in resp.json()["detail"]


def test_empty_body(api: httpx.Client) -> None:
    resp = api.post("/recommend", content=b"", headers={"content-type": "application/json"})
    check_422(resp, "body")
    assert resp.json()["detail"] == "body: a JSON body is required"
    check_422(api.post("/recommend/batch"), "body")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"requests": []}, "requests"),
        ({"requests": [{"k": 1}] * 1001}, "requests"),
        ({"requests": [{"k": 1}, {"k": 0}]}, "requests.1.k"),
        ({"requests": {"k": 1}}, "requests"),
        ({}, "requests"),
    ],
)
def test_batch_bad_body(api: httpx.Client, body: object, field: str) -> None:
    check_422(api.post("/recommend/batch", json=body), field)


def test_a_valid_batch_too_large_to_answer_is_413_as_its_schema_says(api: httpx.Client) -> None:
    resp = api.post("/recommend/batch", json={"requests": [{"items": ["i1"], "k": 1000}] * 101})
    assert resp.status_code == 413
    assert "k sum to 101000" in resp.json()["detail"]
    documented = api.get("/openapi.json").json()["paths"]["/recommend/batch"]["post"]
    assert "k sum past 100,000" in documented["responses"]["413"]["description"]


@pytest.mark.parametrize("name", ["user_id", "k", "exclude_seen"])
def test_a_single_valued_parameter_given_twice_is_refused(api: httpx.Client, name: str) -> None:
    values = {"user_id": ["a", "b"], "k": ["3", "4"], "exclude_seen": ["true", "false"]}[name]
    params = {"user_id": "u", name: values}
    check_422(api.get("/recommend", params=params), name)


def test_similar_refuses_a_second_k(api: httpx.Client) -> None:
    check_422(api.get("/similar/i1", params={"k": ["3", "4"]}), "k")


def test_repeated_items_stay_a_history(api: httpx.Client) -> None:
    resp = api.get("/recommend", params={"items": ["i1", "i2"], "k": 3})
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["items"]) == 3


@pytest.mark.parametrize("k", ["0", "1001", "x"])
def test_similar_bad_k(api: httpx.Client, k: str) -> None:
    check_422(api.get("/similar/i1", params={"k": k}), "k")


def test_oversized_body_by_content_length(api: httpx.Client) -> None:
    big = json.dumps({"items": ["i1"] * 5000}).encode()
    assert len(big) > LIMIT
    resp = api.post("/recommend", content=big, headers={"content-type": "application/json"})
    assert resp.status_code == 413
    assert resp.json() == {"detail": f"request body larger than {LIMIT} bytes"}


def test_oversized_body_streamed_without_length(api: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"items": ['
        for _ in range(5000):  # 30 kB in all
            yield b'"i1", '
        yield b'"i1"]}'

    resp = api.post("/recommend", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in resp.request.headers
    assert resp.status_code == 413


def test_wrong_method_and_path_are_4xx(api: httpx.Client) -> None:
    assert api.delete("/recommend").status_code == 405
    assert api.get("/nowhere").status_code == 404
    assert api.get("/recommend/batch").status_code == 405


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"items": ["\xff\xfe"]}', "not valid UTF-8"),
        (b"[" * 10_000, "nested too deeply"),  # json.loads: RecursionError, not a decode error
        (b'{"k": ' + b"9" * 5_000 + b"}", "an integer of more than 4300 digits"),  # ValueError
    ],
)
def test_every_body_parse_failure_is_the_documented_422(
    api: httpx.Client, raw: bytes, why: str
) -> None:
    resp = api.post("/recommend", content=raw, headers={"content-type": "application/json"})
    check_422(resp, "body")
    assert resp.json()["detail"] == f"body: malformed JSON ({why})"


def test_options_and_405_list_every_method_of_the_path(api: httpx.Client) -> None:
    options = api.options("/recommend")
    assert options.status_code == 204 and options.headers["allow"] == "OPTIONS, GET, POST"
    wrong = api.put("/recommend")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "OPTIONS, GET, POST"
    assert wrong.json() == {"detail": "Method Not Allowed"}
    assert api.options("/recommend/batch").headers["allow"] == "OPTIONS, POST"


def test_cors_preflight_is_still_answered_by_the_cors_middleware(tmp_path: Path) -> None:
    origin = "https://shop.example"
    env = {"RECSYS_CORS_ORIGINS": json.dumps([origin])}
    with running_server(tmp_path / "home", env, wait_ready=False) as url:  # no model needed
        preflight = httpx.options(
            url + "/recommend", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
        )
        plain = httpx.options(url + "/recommend")  # no preflight headers: the router's answer
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert plain.status_code == 204 and plain.headers["allow"] == "OPTIONS, GET, POST"


def test_a_cors_preflight_for_the_bearer_token_is_allowed(tmp_path: Path) -> None:
    origin = "https://shop.example"
    home = tmp_path / "home"
    settings = Settings(home=home, cors_origins=[origin], admin_token="tok")
    asking = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    with TestClient(create_app(settings, ModelService(Workspace(home)))) as client:
        for path in ("/events", "/admin/reload", "/recommend"):
            headers = {**asking, "Access-Control-Request-Headers": "authorization, content-type"}
            preflight = client.options(path, headers=headers)
            assert preflight.status_code == 200, preflight.text  # before: 400, disallowed
            allowed = preflight.headers["access-control-allow-headers"].lower()
            assert "authorization" in allowed and "content-type" in allowed
        other = {**asking, "Access-Control-Request-Headers": "x-other"}
        assert client.options("/events", headers=other).status_code == 400  # not every header


def test_a_413_by_content_length_carries_the_cors_headers(tmp_path: Path) -> None:
    origin = "https://shop.example"
    home = tmp_path / "home"
    settings = Settings(home=home, cors_origins=[origin], max_body_bytes=LIMIT)
    big = json.dumps({"items": ["i1"] * 5000}).encode()
    with TestClient(create_app(settings, ModelService(Workspace(home)))) as client:
        resp = client.post(
            "/recommend",
            content=big,
            headers={"Origin": origin, "content-type": "application/json"},
        )
    assert resp.status_code == 413 and int(resp.request.headers["content-length"]) > LIMIT
    # before: the body limit sat outside CORS, so a browser saw a CORS error, not the 413
    assert resp.headers["access-control-allow-origin"] == origin


def test_a_whole_float_is_an_integer_and_nothing_else_is(api: httpx.Client) -> None:
    """JSON Schema's integer admits 96.0; a fraction, text or a boolean stays refused (strict)."""
    assert api.post("/recommend", json={"items": ["i1"], "k": 96.0}).status_code == 200
    for k in (96.5, "96", True):
        check_422(api.post("/recommend", json={"items": ["i1"], "k": k}), "k")


def _raw(api: httpx.Client, request: bytes) -> bytes:
    host, port = str(api.base_url.host), int(api.base_url.port or 80)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    ("request_bytes", "status", "detail"),
    [
        (b"GET /items/" + b"x" * 70_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414, "URL longer"),
        (b"GARBAGE\r\n\r\n", 400, "invalid HTTP request"),
    ],
)
def test_requests_the_parser_refuses_get_json(
    api: httpx.Client, request_bytes: bytes, status: int, detail: str
) -> None:
    head, _, body = _raw(api, request_bytes).partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"application/json" in head
    assert detail in json.loads(body)["detail"]


def test_admin_disabled_without_token(api: httpx.Client) -> None:
    resp = api.post("/admin/reload", headers={"Authorization": "Bearer anything"})
    assert resp.status_code == 404
    assert "disabled" in resp.json()["detail"]


def test_server_still_healthy_and_no_5xx_counted(api: httpx.Client) -> None:
    assert api.get("/recommend", params={"k": 1}).status_code == 200
    metrics = api.get("/metrics").text
    # /ready answers 503 by contract while the model loads (the fixture polls it at start-up);
    # every other route must never have answered a 5xx to the bad input sent above.
    server_errors = [
        line
        for line in metrics.splitlines()
        if line.startswith("recsys_http_requests_total") and 'status="5' in line
    ]
    assert all('route="/ready"' in line for line in server_errors), server_errors
    assert 'status="422"' in metrics and 'status="413"' in metrics
