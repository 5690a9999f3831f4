"""The replicas smoke's client side: bounded load through the balancer on loopback.

`load`: a few threads send GET /recommend?user_id= and POST /recommend (a session of the
known items) alternately through the balancer on loopback, on an open-loop schedule (request j
at start + j / rate), until `--requests` are sent, `--seconds` have passed or the stop file
appears. Each answer's status (or the connection error's name), latency from its scheduled
send time, and model_version go to a JSON file. A request the client sees fail counts as
failed; nginx's retries on another replica are invisible here, as they are to any client.

Standard library only; scripts/smoke_record.py turns the summary and the smoke's timings into
the run's record.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

K = 10


def _requests(users: list[str], items: list[str], seed: int) -> itertools.cycle:
    """(method, path, body) to send, GET and POST /recommend in turn."""
    rng = random.Random(seed)
    out = []
    for n in range(400):
        if n % 2 == 0:
            out.append(("GET", f"/recommend?user_id={rng.choice(users)}&k={K}", None))
        else:
            session = rng.sample(items, min(5, len(items)))
            out.append(("POST", "/recommend", json.dumps({"items": session, "k": K}).encode()))
    return itertools.cycle(out)


class Load:
    """Open-loop load of a fixed count and duration from `workers` keep-alive connections."""

    def __init__(self, base: str, rate: float, requests: int, seconds: float, stop: Path):
        self.host, self.port = urlsplit(base).hostname, urlsplit(base).port
        self.rate, self.requests, self.seconds, self.stop = rate, requests, seconds, stop
        self.lock = threading.Lock()
        self.next_j = 0
        self.rows: list[tuple[float, float, str, str, str]] = []  # t, ms, method, status, ver

    def _take(self) -> int | None:
        with self.lock:
            j = self.next_j
            self.next_j += 1
        due = j / self.rate
        if j >= self.requests or due > self.seconds or self.stop.exists():
            return None
        return j

    def worker(self, todo: itertools.cycle) -> None:
        """Send the requests taken, each at its scheduled time, on one keep-alive connection."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        while (j := self._take()) is not None:
            due = self.t0 + j / self.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            method, path, body = next(todo)
            headers = {"content-type": "application/json"} if body else {}
            version = ""
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status = str(resp.status)
                if resp.status == 200:
                    version = json.loads(data).get("model_version", "")
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            ms = (time.perf_counter() - due) * 1000
            with self.lock:
                self.rows.append((round(due - self.t0, 3), round(ms, 2), method, status, version))

    def run(self, workers: int, users: list[str], items: list[str]) -> None:
        """Run `workers` threads to the end of the load."""
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        threads = [
            threading.Thread(target=self.worker, args=(_requests(users, items, seed),))
            for seed in range(workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q / 100 * len(s)))], 2)


def summarize(rows: list[list[Any]], wall0: float) -> dict[str, Any]:
    """Requests, failures by status, p50/p99 and the versions answered, from the load's rows."""
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row[3]] = by_status.get(row[3], 0) + 1
    ok = [row[1] for row in rows if row[3] == "200"]
    versions: dict[str, list[float]] = {}
    for t, _, _, status, version in rows:
        if status == "200":
            span = versions.setdefault(version, [t, t])
            span[0], span[1] = min(span[0], t), max(span[1], t)
    return {
        "requests": len(rows),
        "failed": len(rows) - len(ok),
        "by_status": by_status,
        "by_method": {m: sum(r[2] == m for r in rows) for m in ("GET", "POST")},
        "p50_ms": _percentile(ok, 50),
        "p99_ms": _percentile(ok, 99),
        "max_ms": round(max(ok), 2) if ok else None,
        "seconds": round(max((r[0] for r in rows), default=0.0), 1),
        "started_unix": round(wall0, 3),
        "versions_answered_s": versions,
    }


def cmd_load(a: argparse.Namespace) -> None:
    """`load`: run it, write the rows and the summary to --out."""
    load = Load(a.base, a.rate, a.requests, a.seconds, Path(a.stop))
    load.run(a.workers, a.users.split(","), a.items.split(","))
    rows = sorted(load.rows)
    summary = summarize([list(r) for r in rows], load.wall0)
    summary |= {"rate": a.rate, "workers": a.workers, "max_requests": a.requests}
    Path(a.out).write_text(json.dumps({"summary": summary, "rows": rows}) + "\n")
    print(json.dumps(summary), file=sys.stderr)


def main() -> None:
    """The command line: `load` or `record`."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(required=True)
    load = sub.add_parser("load", help="bounded load through the balancer")
    load.add_argument("--base", required=True)
    load.add_argument("--users", required=True, help="comma-separated known user ids")
    load.add_argument("--items", required=True, help="comma-separated known item ids")
    load.add_argument("--rate", type=float, default=20.0, help="requests a second")
    load.add_argument("--requests", type=int, default=6000)
    load.add_argument("--seconds", type=float, default=300.0)
    load.add_argument("--workers", type=int, default=4)
    load.add_argument("--stop", required=True, help="stop early once this file exists")
    load.add_argument("--out", required=True)
    load.set_defaults(func=cmd_load)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
