"""`bench serving`'s load client: keep-alive POST /recommend connections on loopback.

`run_load` runs a bounded load from `concurrency` connections: an open loop at a fixed rate
(latency counted from each request's scheduled send time, so a slow server cannot hide
queueing) or a closed loop (every connection sends again at once: the saturation throughput).
Any status but 200, and any broken connection, counts as an error; a connection the server
ends after an answer (`Connection: close`, as nginx does after `keepalive_requests`) is
replaced by a new one, which is no error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.speed.raw_search import HISTORY, K


def bodies(item_ids: Sequence[str], count: int, seed: int) -> list[bytes]:
    """`count` request bodies: sessions of HISTORY ids drawn at random from `item_ids`, k = K."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(item_ids), size=(count, HISTORY))
    return [json.dumps({"items": [item_ids[i] for i in row], "k": K}).encode() for row in draws]


async def _request(reader: Any, writer: Any, body: bytes) -> tuple[int, bool]:
    """Send one POST /recommend on the connection and read its answer.

    Returns its status and whether the server closes the connection after it (`Connection:
    close`, as nginx says after `keepalive_requests` answers on one connection).

    Raises:
        ConnectionResetError: the connection closed before an answer came.

    """
    head = (
        b"POST /recommend HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("closed before an answer")
    length, closes = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        closes |= name.strip().lower() == b"connection" and value.strip().lower() == b"close"
    await reader.readexactly(length)
    return int(status_line.split()[1]), closes


async def run_load(
    port: int, bodies: list[bytes], duration: float, concurrency: int, rate: float | None
) -> dict[str, Any]:
    """Run `concurrency` connections for `duration` s; open loop at `rate` req/s, else closed."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(10**9))
    start = time.perf_counter() + 0.05
    stop = start + duration

    async def client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for i in counter:
                due = start + i / rate if rate else time.perf_counter()
                if due >= stop:
                    return
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                try:
                    status, closes = await _request(reader, writer, bodies[i % len(bodies)])
                except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                    status, closes = 0, True  # counted as an error
                if closes:  # the server ends this connection: the next request opens another
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                latencies.append(time.perf_counter() - due)
                errors += status != 200
        finally:
            writer.close()

    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    ms = np.asarray(latencies) * 1000
    return {
        "mode": f"open loop at {rate:g} req/s" if rate else "closed loop (saturation)",
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
    }
