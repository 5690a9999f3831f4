"""Model lifecycle on the real server: not ready before a model, hot reload under load."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.api.settings import Settings
from data.workspace import Workspace
from serving.service import ModelService
from tests.serving.bundles import PLANTED_HISTORY, make_bundle
from tests.serving.server import running_server

TARGETS = {"v1": "i40", "v2": "i41", "v3": "i42"}  # each version's planted top-1 item


def wait_for(check: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_not_ready_until_a_model_is_published(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_server(home, wait_ready=False) as url, httpx.Client(base_url=url) as api:
        assert api.get("/health").status_code == 200
        ready = api.get("/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "not ready"
        assert "no model is published" in ready.json()["detail"]
        rec = api.get("/recommend", params={"user_id": "u"})
        assert rec.status_code == 503 and "no model loaded" in rec.json()["detail"]
        assert "recsys_model_loaded 0.0" in api.get("/metrics").text
        make_bundle(Workspace(home).models_dir, "v1")  # the poller finds it
        wait_for(lambda: api.get("/ready").status_code == 200)
        assert api.get("/ready").json()["model_version"] == "v1"


def test_503_says_which_model_loads_or_why_it_was_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    svc = ModelService(ws)  # given to the app: it never loads or polls on its own
    with TestClient(create_app(Settings(home=ws.root), svc)) as api:

        def detail() -> str:
            resp = api.get("/recommend", params={"user_id": "u"})
            assert resp.status_code == 503
            return str(resp.json()["detail"])

        assert detail() == "no model loaded yet; train one with `recsys train`"
        bundle = make_bundle(ws.models_dir, "v1")  # published; its index is not built yet
        assert detail() == "no model loaded yet: loading v1"  # before: "train one" again
        (bundle / "item_embeddings.npy").write_bytes(b"")
        svc.poll_once()  # refused
        refused = detail()
        assert refused.startswith("no model loaded: ") and "item_embeddings.npy" in refused


def test_a_failed_admin_reload_says_whether_a_model_still_serves(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    svc = ModelService(ws)  # given to the app: it never loads or polls on its own
    auth = {"Authorization": "Bearer tok"}
    with TestClient(create_app(Settings(home=ws.root, admin_token="tok"), svc)) as api:
        first = api.post("/admin/reload", headers=auth)  # nothing published
        assert first.status_code == 409
        # before: "the old model keeps serving", with no model at all
        assert first.json()["detail"].startswith("reload failed, no model is served: ")
        make_bundle(ws.models_dir, "v1")
        assert api.post("/admin/reload", headers=auth).json()["model_version"] == "v1"
        broken = make_bundle(ws.models_dir, "v2", target=41, seed=1)
        (broken / "item_embeddings.npy").write_bytes(b"")
        refused = api.post("/admin/reload", headers=auth)
        assert refused.status_code == 409 and "item_embeddings.npy" in refused.json()["detail"]
        assert refused.json()["detail"].startswith("reload failed, the old model keeps serving: ")


class Load:
    """Client threads sending the planted query until stopped (bounded to `max_requests`)."""

    def __init__(self, url: str, threads: int = 2, max_requests: int = 20_000) -> None:
        self.url, self.max_requests = url, max_requests
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.seen: list[tuple[float, str, str]] = []  # (time, model_version, top item)
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]

    def run(self) -> None:
        body = {"items": PLANTED_HISTORY, "k": 3}
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stop.is_set() and len(self.seen) < self.max_requests:
                try:
                    resp = client.post("/recommend", json=body)
                    data = resp.json()
                    with self.lock:
                        self.seen.append(
                            (time.monotonic(), data["model_version"], data["items"][0]["item_id"])
                        )
                    if resp.status_code != 200:
                        self.failures.append(f"{resp.status_code}: {resp.text}")
                except (httpx.HTTPError, KeyError, ValueError) as err:
                    self.failures.append(repr(err))

    def latest(self) -> str:
        with self.lock:
            return self.seen[-1][1] if self.seen else ""


def test_reload_under_load_fails_no_request(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=3000)
    env = {"RECSYS_ADMIN_TOKEN": "tok"}
    with running_server(ws.root, env) as url, httpx.Client(base_url=url) as admin:
        load = Load(url)
        for t in load.threads:
            t.start()
        try:
            wait_for(lambda: len(load.seen) > 20)
            # v2 arrives through the CURRENT poller...
            make_bundle(ws.models_dir, "v2", num_items=3000, target=41, seed=1)
            wait_for(lambda: load.latest() == "v2")
            # ...v3 through the admin endpoint
            make_bundle(ws.models_dir, "v3", num_items=3000, target=42, seed=2)
            resp = admin.post("/admin/reload", headers={"Authorization": "Bearer tok"})
            assert resp.status_code == 200, resp.text
            assert resp.json()["model_version"] == "v3"
            n_before = len(load.seen)
            wait_for(lambda: len(load.seen) > n_before + 20)
        finally:
            load.stop.set()
            for t in load.threads:
                t.join(timeout=15)
    assert load.failures == []
    versions = [v for _, v, _ in sorted(load.seen)]
    assert versions[0] == "v1" and versions[-1] == "v3" and "v2" in versions
    # every answer is consistent with the version it names (no half-swapped model)
    assert all(top == TARGETS[v] for _, v, top in load.seen)
    # once a version is served, an older one never comes back (allowing in-flight overlap)
    first_v3 = min(t for t, v, _ in load.seen if v == "v3")
    assert all(v == "v3" for t, v, _ in load.seen if t > first_v3 + 1.0)


def test_broken_bundles_never_stop_reloading_and_are_reported(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    first = make_bundle(ws.models_dir, "v1")
    (first / "item_embeddings.npy").write_bytes(b"")  # what a power loss leaves
    env = {"RECSYS_ADMIN_TOKEN": "tok"}
    auth = {"Authorization": "Bearer tok"}
    with running_server(ws.root, env, wait_ready=False) as url, httpx.Client(base_url=url) as api:
        wait_for(lambda: "item_embeddings.npy" in api.get("/ready").text)
        ready = api.get("/ready")
        assert ready.status_code == 503 and ready.json()["published_version"] == "v1"
        reload = api.post("/admin/reload", headers=auth)
        assert reload.status_code == 409 and "item_embeddings.npy" in reload.json()["detail"]
        make_bundle(ws.models_dir, "v2", target=41, seed=1)  # a good CURRENT: picked up
        wait_for(lambda: api.get("/ready").status_code == 200)
        broken = make_bundle(ws.models_dir, "v3", target=42, seed=2)
        (broken / "query_tower.pt").write_bytes(b"\x80\x02")  # truncated
        wait_for(lambda: api.get("/ready").json().get("published_version") == "v3")
        wait_for(lambda: "query_tower.pt" in api.get("/ready").json().get("last_reload_error", ""))
        state = api.get("/ready").json()
        assert state["model_version"] == "v2" and state["last_reload_error_at"].endswith("+00:00")
        assert api.post("/recommend", json={"items": PLANTED_HISTORY}).status_code == 200
        metrics = api.get("/metrics").text
        assert 'recsys_model_info{version="v2"} 1.0' in metrics
        assert 'recsys_published_model_info{version="v3"} 1.0' in metrics
        failures = [ln for ln in metrics.splitlines() if ln.startswith("recsys_model_reload_f")]
        assert failures and float(failures[0].split()[-1]) >= 3  # v1 twice, v3 once
        make_bundle(ws.models_dir, "v4", target=43, seed=3)  # the poller still polls
        wait_for(lambda: api.get("/ready").json()["model_version"] == "v4")
        assert "last_reload_error" not in api.get("/ready").json()


def test_a_path_with_a_newline_cannot_forge_a_log_line(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1")
    with running_server(ws.root) as url, httpx.Client(base_url=url) as api:
        forged = "/items/x%0A2026-01-01 00:00:00,000 INFO recsys.access: GET /admin 200 0.1ms"
        assert api.get(forged).status_code == 404
        assert api.get("/items/y%0D%E2%80%A8z").status_code == 404
    log = (ws.root / "server.log").read_text()
    assert not [ln for ln in log.splitlines() if ln.startswith("2026-01-01")]
    assert "GET /items/x\\x0a2026-01-01 00:00:00,000 INFO recsys.access: GET /admin" in log
    assert "GET /items/y\\x0d\\u2028z 404" in log
