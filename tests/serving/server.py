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
from typing import Any

import httpx

from benchmarks.harness.server_process import stop

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
    with running_servers(home, 1, env, wait_ready, timeout) as servers:
        yield servers[0][0]


@contextmanager
def running_servers(
    home: Path,
    count: int,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    timeout: float = 60,
) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """Start `count` servers on one home at once (replicas); yield (URL, process) pairs.

    Each logs to home/server.log (the first) or home/server-<n>.log; all are stopped afterwards.
    """
    full_env = {**os.environ, "RECSYS_RELOAD_INTERVAL": "0.2", **(env or {})}
    home.mkdir(parents=True, exist_ok=True)
    started: list[tuple[str, subprocess.Popen[bytes], Any]] = []
    try:
        for n in range(count):
            port = free_port()
            log = open(home / ("server.log" if n == 0 else f"server-{n}.log"), "w")  # noqa: SIM115
            cmd = [sys.executable, "-m", "app", "serve", "--home", str(home)]
            cmd += ["--host", "127.0.0.1", "--port", str(port)]
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=full_env, stdout=log, stderr=log)
            started.append((f"http://127.0.0.1:{port}", proc, log))
        for url, proc, log in started:
            _wait(url, proc, "/ready" if wait_ready else "/health", timeout, Path(log.name))
        yield [(url, proc) for url, proc, _ in started]
    finally:
        for _, proc, log in started:
            stop(proc, grace=10)
            log.close()


def _wait(url: str, proc: subprocess.Popen[bytes], path: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server not {path} in {timeout} s: {log.read_text()}")
