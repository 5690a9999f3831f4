"""The shipped balancer on loopback, in front of local replicas, for `bench serving --replicas`.

The configuration is `deploy/nginx.conf`, the balancer of the replicas example, with three
changes so that it runs outside compose: the upstream lists the local replicas' ports instead
of compose's `api` name (and its DNS resolver), it listens on a loopback port, and its pid,
logs and temporary files live in the bench's work folder. The retry rules and the single
worker process are the shipped ones, so the load measures the balancer a deployment runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness.server_process import stop
from benchmarks.paths import REPO
from data.errors import RecsysInputError

SHIPPED = REPO / "deploy" / "nginx.conf"
# (what the shipped file says, what it becomes here): each must match exactly once
EDITS = (
    (r"^\s*resolver [^;]*;\n", ""),
    (r"^(\s*)server api:8000 resolve;\n", "{servers}"),
    (r"^(\s*)listen 8000;", r"\1listen 127.0.0.1:{port};"),
    (r"^http \{\n", "http {{\n    access_log {work}/access.log;\n"),
)
HEAD = "pid {work}/nginx.pid;\nerror_log {work}/error.log;\n"


def require_nginx() -> str:
    """The nginx executable (PATH or /usr/sbin); refused if missing."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RecsysInputError("--replicas needs nginx (for example: apt install nginx-light)")
    return found


def local_config(ports: list[int], port: int, work: Path, shipped: str) -> str:
    """`shipped` (deploy/nginx.conf's text) pointed at `ports` on loopback, listening on `port`.

    Raises:
        ValueError: the shipped file no longer has a line these edits expect.

    """
    text = shipped
    for pattern, replacement in EDITS:
        indent = re.search(pattern, text, flags=re.MULTILINE)
        if indent is None or len(re.findall(pattern, text, flags=re.MULTILINE)) != 1:
            raise ValueError(f"{SHIPPED}: expected one line matching {pattern!r}")
        lead = indent.group(1) if indent.groups() else ""
        servers = "".join(f"{lead}server 127.0.0.1:{p};\n" for p in ports)
        filled = replacement.format(servers=servers, port=port, work=work)
        text = re.sub(pattern, _expander(filled), text, flags=re.MULTILINE)
    temp = "".join(
        f"    {kind}_temp_path {work}/{kind}_temp;\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return HEAD.format(work=work) + text.replace("http {\n", "http {\n" + temp, 1)


def _expander(template: str) -> Callable[[re.Match[str]], str]:
    """A `re.sub` replacement: `template` with the match's groups filled in, nothing else."""
    return lambda match: match.expand(template)


class Balancer:
    """nginx with `local_config`, started and stopped around a load."""

    def __init__(self, ports: list[int], port: int, work: Path) -> None:
        """Balance `ports` behind `port`; files under `work`."""
        self.port, self.work = port, work
        work.mkdir(parents=True, exist_ok=True)
        self.conf = work / "nginx.conf"
        self.conf.write_text(local_config(ports, port, work, SHIPPED.read_text()))
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Balancer:
        """Start nginx in the foreground and wait until it accepts connections."""
        cmd = [require_nginx(), "-p", str(self.work), "-c", str(self.conf), "-g", "daemon off;"]
        with (self.work / "stderr.log").open("w") as err:
            self.proc = subprocess.Popen(cmd, stderr=err)
        try:
            _wait_listening(self.port, self.proc, self.work)
        except BaseException:
            self.__exit__()
            raise
        return self

    def pids(self) -> list[int]:
        """The master's pid and its workers' (for their CPU clocks)."""
        assert self.proc is not None
        return [self.proc.pid, *_children(self.proc.pid)]

    def __exit__(self, *exc: object) -> None:
        """Stop nginx."""
        if self.proc is not None:
            stop(self.proc)


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _wait_listening(port: int, proc: subprocess.Popen[bytes], work: Path) -> None:
    """Return once `port` accepts a connection; RuntimeError if nginx exits or 10 s pass."""
    import socket

    for _ in range(100):
        if proc.poll() is not None:
            logs = [work / "stderr.log", work / "error.log"]
            log = "".join(f.read_text() for f in logs if f.is_file())
            raise RuntimeError(f"nginx exited: {log.strip()[-500:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nginx did not listen on {port} within 10 s")
