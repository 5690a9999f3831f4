"""Run the real `recsys serve` (uvicorn in a subprocess) on a free loopback port for tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(
    home: Path, env: dict[str, str] | None = None, wait_ready: bool = True, timeout: float = 60
) -> Iterator[str]:
    """Start `python -m app serve` for `home`; yield its base URL; stop it afterwards.

    Waits for /health (and /ready when `wait_ready`); the server log goes to home/server.log.
    """
    port = free_port()
    full_env = {**os.environ, "RECSYS_RELOAD_INTERVAL": "0.2", **(env or {})}
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "server.log", "w")  # noqa: SIM115 - closed in finally
    cmd = [sys.executable, "-m", "app", "serve", "--home", str(home)]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=full_env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, "/ready" if wait_ready else "/health", timeout, home)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait(url: str, proc: subprocess.Popen[bytes], path: str, timeout: float, home: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {(home / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server not {path} in {timeout} s: {(home / 'server.log').read_text()}")
