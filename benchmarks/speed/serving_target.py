"""What `bench serving` loads: one `recsys serve` process, or replicas behind the balancer.

With one replica the load goes straight to the server, as before there were replicas; with
several, each is its own `recsys serve` process on the same home (the index file built once,
read by each), and the load goes through the shipped nginx configuration
(`benchmarks/speed/balancer.py`) on loopback.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

from benchmarks.harness.server_process import free_port, serve, stop, wait_ready
from benchmarks.speed.balancer import Balancer


class ServingTarget:
    """`replicas` servers of `home` (and the balancer when more than one), around a load."""

    def __init__(self, home: Path, kind: str, ef_search: int, replicas: int, work: Path) -> None:
        """Serve `home` with index `kind` at HNSW `ef_search`; logs and balancer under `work`."""
        self.home, self.kind, self.replicas, self.work = home, kind, replicas, work
        self.env = {"RECSYS_HNSW_EF_SEARCH": str(ef_search)}
        self.servers: list[subprocess.Popen[bytes]] = []
        self.balancer: Balancer | None = None
        self.port = 0
        self.ready_s = 0.0
        self._stack = ExitStack()

    def __enter__(self) -> ServingTarget:
        """Start every server, wait until each is ready, then the balancer in front."""
        began = time.perf_counter()
        ports = [free_port() for _ in range(self.replicas)]
        try:
            for i, port in enumerate(ports):
                log = self.work / f"server-{self.home.name}-{i}.log"
                proc = serve(self.home, port, self.kind, log, self.env)
                self._stack.callback(stop, proc)
                self.servers.append(proc)
            for port, proc in zip(ports, self.servers, strict=True):
                wait_ready(port, proc, timeout=1800)
            self.ready_s = time.perf_counter() - began
            self.port = ports[0]
            if self.replicas > 1:
                self.port = free_port()
                self.balancer = Balancer(ports, self.port, self.work / "balancer")
                self._stack.enter_context(self.balancer)
        except BaseException:
            self._stack.close()
            raise
        return self

    def server_pids(self) -> list[int]:
        """The servers' process ids."""
        return [proc.pid for proc in self.servers]

    def balancer_pids(self) -> list[int]:
        """The balancer's (nginx) master and worker process ids (none with one replica)."""
        return [] if self.balancer is None else self.balancer.pids()

    def __exit__(self, *exc: object) -> None:
        """Stop the balancer, then the servers."""
        self._stack.close()
