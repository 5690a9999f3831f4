"""Replicas on loopback: two real servers on one home, deploy/nginx.conf's retry rules in front.

The servers agree on the version after a publish within two reload intervals (plus the load);
with one replica SIGKILLed, nginx running deploy/nginx.conf (its upstream pointed at the two
loopback ports, Docker's resolver left out) answers every GET and POST /recommend from the
other. Needs an nginx binary (PATH, or RECSYS_TEST_NGINX); skipped, with the reason, without.
scripts/replicas-smoke.sh runs the compose file itself (tests/app/test_replicas_smoke.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.serving.bundles import PLANTED_HISTORY, make_bundle
from tests.serving.server import REPO_ROOT, free_port, running_servers

TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")  # out of /var/lib/nginx
INTERVAL = 0.2  # the servers' RECSYS_RELOAD_INTERVAL (running_servers' default)


def _nginx_conf(tmp: Path, port: int, upstreams: list[str]) -> str:
    """deploy/nginx.conf on loopback: listen on `port`, the upstream's servers = `upstreams`."""
    text = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"server {u.removeprefix('http://')};\n" for u in upstreams)
    text, n = re.subn(r"server api:8000 resolve;\n", servers, text)
    assert n == 1, "deploy/nginx.conf's upstream line changed"
    text = re.sub(r"\n\s*resolver [^;]*;", "", text)
    text = text.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    temps = "".join(f"{k}_temp_path {tmp}/{k};\n" for k in TEMP_PATHS)
    text = text.replace("http {", f"http {{\naccess_log off;\n{temps}", 1)
    return f"daemon off;\nmaster_process off;\npid {tmp}/nginx.pid;\n{text}"


@contextmanager
def _nginx(tmp: Path, upstreams: list[str]) -> Iterator[str]:
    binary = os.environ.get("RECSYS_TEST_NGINX") or shutil.which("nginx")
    if not binary:
        pytest.skip("no nginx binary (PATH or RECSYS_TEST_NGINX): the retry rules are not run")
    port = free_port()
    (tmp / "nginx.conf").write_text(_nginx_conf(tmp, port, upstreams))
    log = open(tmp / "nginx.log", "w")  # noqa: SIM115 - closed in finally
    cmd = [binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _status(url + "/health") == 200, 10, f"nginx: {cmd}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


def _until(check: object, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def _version(url: str) -> str | None:
    try:
        return httpx.get(url + "/ready", timeout=2).json().get("model_version")
    except (httpx.HTTPError, ValueError):
        return None


def test_replicas_agree_and_nginx_retries_reads_on_the_live_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_bundle(home / "models", "v1")
    with running_servers(home, 2) as servers:
        urls = [url for url, _ in servers]
        assert [_version(u) for u in urls] == ["v1", "v1"]
        make_bundle(home / "models", "v2", seed=1)  # published: both switch by themselves
        took = _until(lambda: all(_version(u) == "v2" for u in urls), 10, "both on v2")
        assert took < 2 * INTERVAL + 5  # two intervals plus a tiny bundle's load
        nginx_tmp = tmp_path / "nginx"
        nginx_tmp.mkdir()
        with _nginx(nginx_tmp, urls) as balancer, httpx.Client(base_url=balancer) as client:
            body = {"items": PLANTED_HISTORY, "k": 5}
            for _ in range(4):  # nginx now keeps an idle connection to each replica
                assert client.post("/recommend", json=body).status_code == 200
            servers[0][1].send_signal(signal.SIGKILL)
            servers[0][1].wait(timeout=10)
            for n in range(20):  # round robin: every other one first tries the dead replica
                get = client.get("/recommend", params={"user_id": "u1", "k": 5})
                post = client.post("/recommend", json=body)
                assert (get.status_code, post.status_code) == (200, 200), (n, get.text, post.text)
                assert get.json()["model_version"] == post.json()["model_version"] == "v2"
        # the dead replica was tried, and the client saw the other's answer
        assert "Connection refused" in (nginx_tmp / "error.log").read_text()
