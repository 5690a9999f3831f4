"""Where a loaded server's time goes, behind `bench serving --profile`.

While a load runs, `py-spy` samples a server process's Python stacks (every thread, idle ones
left out), and the CPU seconds of the servers (`/proc/<pid>/stat`, summed over replicas), of
the balancer (its master and worker) and of the load client (this process) are read before and
after: per request, the CPU each side spends, and how many cores' worth each kept busy (one
server process runs its event loop on one thread, the model pass on another); each sampled
stack is put in the first stage its frames reach, counted from the innermost frame out
(`STAGES`), so the shares say which stage of a request the server's busy time went to.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from data.errors import RecsysInputError

# (stage, what its frames contain), tried in order on each frame from the innermost out
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("index search", ("serving/index_kinds.py", "faiss")),
    ("query tower", ("model/towers", "torch/")),
    ("batching and the model thread", ("serving/batcher.py", "concurrent/futures")),
    ("recommend (ids, filters, response)", ("serving/recommender.py", "serving/routes")),
    ("routing, validation, JSON", ("fastapi", "starlette", "pydantic", "json")),
    ("HTTP and event loop", ("uvicorn", "httptools", "uvloop", "asyncio", "h11")),
)
OTHER = "other"
TICKS = os.sysconf("SC_CLK_TCK")


def require_py_spy() -> str:
    """The `py-spy` executable (beside this Python's, or on PATH); refused if missing."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.is_file() else shutil.which("py-spy")
    if found is None:
        raise RecsysInputError("--profile needs py-spy: pip install py-spy")
    return found


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stage_of(stack: str) -> str:
    """The stage of one folded stack (`outer;...;inner`), from its innermost frame out."""
    for frame in reversed(stack.split(";")):
        for stage, marks in STAGES:
            if any(mark in frame for mark in marks):
                return stage
    return OTHER


def stage_shares(folded: str) -> dict[str, float]:
    """Each stage's share of the samples of py-spy's raw (folded) output, largest first."""
    counts: Counter[str] = Counter()
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[stage_of(stack)] += int(count)
    total = sum(counts.values()) or 1
    return {stage: round(n / total, 3) for stage, n in counts.most_common()}


class Profile:
    """py-spy on a server and CPU clocks on every side, around one load."""

    def __init__(
        self, servers: list[int], seconds: float, balancer: list[int] | None = None
    ) -> None:
        """Clock the `servers` (py-spy samples the first) and `balancer` pids for `seconds`."""
        self.servers, self.balancer, self.seconds = list(servers), list(balancer or []), seconds
        self._folded = Path(tempfile.mkstemp(prefix="recsys-pyspy-", suffix=".txt")[1])
        self._spy: subprocess.Popen[bytes] | None = None
        self._start: list[float] = []

    def _clocks(self) -> list[float]:
        """CPU seconds so far of each server, the balancer and this client."""
        servers = [process_cpu_seconds(pid) for pid in self.servers]
        return [*servers, sum(process_cpu_seconds(pid) for pid in self.balancer), own_cpu_seconds()]

    def __enter__(self) -> Profile:
        """Start sampling and the clocks."""
        cmd = [require_py_spy(), "record", "--pid", str(self.servers[0]), "--rate", "200",
               "--duration", str(int(self.seconds)), "--format", "raw", "--nonblocking",
               "--output", str(self._folded)]  # fmt: skip
        self._spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._start = self._clocks()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the clocks and wait for py-spy's file."""
        spent = [b - a for a, b in zip(self._start, self._clocks(), strict=True)]
        self.each_server, (self.balancer_cpu, self.client_cpu) = spent[:-2], spent[-2:]
        self.error = ""
        if self._spy is not None:
            _, err = self._spy.communicate(timeout=self.seconds + 60)
            if self._spy.returncode:
                self.error = err.decode(errors="replace").strip()[-500:] or "py-spy failed"

    def result(self, requests: int) -> dict[str, Any]:
        """CPU ms per request and cores busy of servers, client and balancer; stage shares.

        Raises:
            RuntimeError: py-spy failed (it could not attach, say): no stage shares to give.

        """
        folded = self._folded.read_text() if self._folded.is_file() else ""
        self._folded.unlink(missing_ok=True)
        if self.error or not folded.strip():
            raise RuntimeError(f"py-spy sampled nothing from the server: {self.error}")
        per = max(requests, 1)
        sides = [("server", sum(self.each_server)), ("client", self.client_cpu)]
        if self.balancer:
            sides.append(("balancer", self.balancer_cpu))
        out: dict[str, Any] = {}
        for side, seconds in sides:
            out[f"{side}_cpu_ms_per_request"] = round(1000 * seconds / per, 3)
            out[f"{side}_cores_busy"] = round(seconds / self.seconds, 2)
        each = [round(seconds / self.seconds, 2) for seconds in self.each_server]
        return {
            **out, "each_server_cores_busy": each, "server_stage_shares": stage_shares(folded),
            "stage_shares_of": f"server process 1 of {len(self.servers)}",  # py-spy's one
        }  # fmt: skip
