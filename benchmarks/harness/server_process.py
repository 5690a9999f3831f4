"""A real `recsys serve` subprocess for the benchmarks: a free port, the server, its /ready.

`bench serving` and `bench events` load-test the server as users run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port free on localhost now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(
    home: Path, port: int, kind: str, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`recsys serve` on `home` as a subprocess (no CURRENT polling), its output in `log`."""
    env = {**os.environ, "RECSYS_RELOAD_INTERVAL": "0", "RECSYS_INDEX": kind, **(env or {})}
    cmd = [sys.executable, "-m", "app", "serve", "--home", str(home), "--port", str(port)]
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float) -> float:
    """Seconds until the server's /ready answers 200 (RuntimeError if it exits or times out)."""
    import httpx

    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError("server exited before it was ready")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                return time.perf_counter() - start
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not ready after {timeout} s")


def stop(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM, and SIGKILL if the process is still there `grace` seconds later."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
