"""`bench serving`: load-test the real server on synthetic catalogues of given sizes.

For each size: write a synthetic bundle (random L2-normalised item embeddings and a randomly
initialised default query tower: latency does not depend on the weights), start `recsys serve`
as a subprocess, wait for /ready, then run two bounded loads of POST /recommend (anonymous
sessions of 20 random items, k = 10) from keep-alive asyncio connections on localhost:
an open loop at a fixed rate (latency counted from the scheduled send time, so a slow server
cannot hide queueing) and a closed loop (every client sends again at once: the saturation
throughput). Also times the raw `index.search` for the same query vectors. The client runs
on uvloop, like the server, and shares the machine's cores with it.
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
import uvloop

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.harness.server_process import free_port, serve, wait_ready
from benchmarks.paths import RESULTS
from data.errors import RecsysInputError

HISTORY = 20
K = 10


def synthetic_bundle(
    home: Path, num_items: int, dim: int, seed: int, item_prefix: str = ""
) -> Path:
    """Publish a bundle of random unit item embeddings and a random default query tower.

    Item ids are `item_prefix` + "1".."N" (latency does not depend on the weights).
    """
    from datetime import UTC, datetime

    import polars as pl
    import torch

    from model.build import build_query_tower
    from model.bundle import Manifest, publish, write_bundle
    from model.config import ModelConfig

    torch.manual_seed(seed)
    cfg = ModelConfig(dim=dim)
    tower = build_query_tower(cfg, num_items).eval()
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((num_items + 1, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[0] = 0.0
    items = pl.DataFrame(
        {
            "item_idx": np.arange(1, num_items + 1, dtype=np.int64),
            "item_id": item_prefix + pl.int_range(1, num_items + 1, eager=True).cast(pl.String),
            "popularity": rng.zipf(1.5, num_items).astype(np.int64),
        }
    )
    version = f"bench-{num_items}" if dim == 64 else f"bench-{num_items}-d{dim}"
    models = home / "models"
    if not (models / version).is_dir():
        manifest = Manifest(
            version=version, created_at=datetime.now(UTC), dataset="synthetic-random",
            num_items=num_items, model=cfg, temperature=cfg.temperature,
        )  # fmt: skip
        write_bundle(models, manifest, query_tower=tower, item_embeddings=emb, items=items)
    publish(models, version)
    return models / version


def _bodies(num_items: int, count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    draws = rng.integers(1, num_items + 1, size=(count, HISTORY))
    return [json.dumps({"items": [str(i) for i in row], "k": K}).encode() for row in draws]


async def _request(reader: Any, writer: Any, body: bytes) -> int:
    head = (
        b"POST /recommend HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def _load(
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
                    status = await _request(reader, writer, bodies[i % len(bodies)])
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    status = 0
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


def _raw_search(bundle_dir: Path, bodies: list[bytes], kind: str) -> dict[str, Any]:
    """Time `index.search` alone (k + 20 over-fetch, one query at a time) on the cached index.

    Also the index's recall@10 against exact search for the bench's own session queries.
    """
    from model.bundle import ModelBundle
    from serving.index import IndexParams, build_index
    from serving.index_recall import recall_at_k
    from serving.recommender import Recommender

    bundle = ModelBundle.load(bundle_dir)
    index = build_index(bundle.item_embeddings, IndexParams(kind=kind), cache_dir=bundle_dir)
    rec = Recommender(bundle, index)
    hist = [[bundle.id_to_idx[i] for i in json.loads(b)["items"]] for b in bodies[:500]]
    queries = rec.encode(hist)
    recall = recall_at_k(index, bundle.item_embeddings[1:], queries, K)
    times = options.search_seconds(index, queries, K + HISTORY)
    import torch

    torch.set_num_threads(1)  # as in the server
    rec.encode(hist[:10])  # warm-up
    t0 = time.perf_counter()
    for h in hist[:200]:
        rec.encode([h])
    encode_ms = (time.perf_counter() - t0) / 200 * 1000
    us = np.asarray(times) * 1e6
    return {
        "index": index.describe(),
        "recall_at_10_vs_exact": round(recall, 4),
        "search_p50_us": round(float(np.percentile(us, 50)), 1),
        "search_p99_us": round(float(np.percentile(us, 99)), 1),
        "query_tower_encode_ms": round(encode_ms, 3),
    }


def run_size(
    num_items: int,
    work: Path,
    *,
    kind: str,
    duration: float,
    concurrency: int,
    rate: float,
    dim: int = 64,
) -> dict[str, Any]:
    """Bundle, server, loads and raw search for one catalogue size."""
    home = work / f"home-{num_items}-d{dim}"
    t0 = time.perf_counter()
    bundle_dir = synthetic_bundle(home, num_items, dim=dim, seed=0)
    bundle_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw = _raw_search(bundle_dir, _bodies(num_items, 500, seed=1), kind)  # builds the cache
    index_s = time.perf_counter() - t0
    port = free_port()
    proc = serve(home, port, kind, work / f"server-{num_items}.log")
    try:
        ready_s = wait_ready(port, proc, timeout=1800)
        bodies = _bodies(num_items, 5000, seed=2)
        uvloop.run(_load(port, bodies, 2.0, concurrency, None))  # warm-up
        loads = [
            uvloop.run(_load(port, bodies, duration, concurrency, rate)),
            uvloop.run(_load(port, bodies, duration, concurrency, None)),
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "items": num_items,
        "dim": dim,
        "bundle_write_s": round(bundle_s, 1),
        "index_build_and_raw_search_s": round(index_s, 1),
        "server_ready_s": round(ready_s, 1),
        "raw": raw,
        "loads": loads,
    }


def plot(record: dict[str, Any], path: Path) -> None:
    """Open-loop latency percentiles and closed-loop throughput against catalogue size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted(record["metrics"]["runs"], key=lambda r: r["items"])
    sizes = [r["items"] for r in runs]
    open_loop = [r["loads"][0] for r in runs]
    closed = [r["loads"][1] for r in runs]
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        lat.plot(sizes, [load[key] for load in open_loop], "o-", label=key.removesuffix("_ms"))
    lat.axhline(20, color="red", linestyle="--", label="p99 target (20 ms)")
    rate = record["config"]["open_loop_rate"]
    lat.set(xscale="log", xlabel="items", ylabel="ms", title=f"open loop at {rate:g} req/s")
    thr.plot(sizes, [load["requests_per_s"] for load in closed], "o-", label="closed loop")
    thr.axhline(rate, color="red", linestyle="--", label=f"{rate:g} req/s")
    clients = record["config"]["concurrency"]
    thr.set(xscale="log", xlabel="items", ylabel="requests / s", title=f"{clients} clients")
    for ax in (lat, thr):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    options.save_figure(fig, path)


def bench_serving(
    items: Annotated[str, typer.Option(help="Comma-separated catalogue sizes.")] = "100000,1000000",
    duration: Annotated[float, typer.Option(help="Seconds per load phase.")] = 30.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Concurrent client connections.")] = 32,
    rate: Annotated[float, typer.Option(help="Open-loop request rate (req/s).")] = 300.0,
    index: Annotated[str, typer.Option(help="Index kind: auto|flat|hnsw|ivf|ivfpq.")] = "hnsw",
    dim: Annotated[
        int, typer.Option(min=1, help="Embedding width d (the model's default: 256).")
    ] = 64,
    work_dir: Annotated[
        Path | None, typer.Option(help="Where bundles go.", show_default="a temporary folder")
    ] = None,
    json_path: Annotated[Path, typer.Option("--out", help="The result record.")] = RESULTS
    / "serving/serving.json",
    plot_path: Annotated[
        Path, typer.Option("--plot", help="Latency and throughput plot (PNG).")
    ] = RESULTS / "serving/serving.png",
) -> None:
    """Load-test `recsys serve` on synthetic catalogues; requests/s, p50/p95/p99, errors."""
    sizes = options.ints(items, "items")
    for name, value in (("--rate", rate), ("--duration", duration)):
        if not (math.isfinite(value) and value > 0):
            raise RecsysInputError(f"{name} must be a finite number > 0, got {value}")
    require_writable({"--out": json_path, "--plot": plot_path})
    setup = {
        "items": sizes, "duration_s": duration, "concurrency": concurrency,
        "open_loop_rate": rate, "index": index,
        "request": f"POST /recommend, {HISTORY} random items, k={K}",
        "dim": dim,
        "embeddings": f"random L2-normalised, d={dim}; default query tower, random weights",
        "server": "recsys serve: uvicorn, uvloop + httptools, opportunistic request batching",
        "client": "uvloop keep-alive HTTP/1.1 on localhost, same machine as the server",
    }  # fmt: skip
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-bench-") as tmp:
        work = work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = []
        for n in sizes:
            runs.append(run_size(n, work, kind=index, duration=duration,
                                 concurrency=concurrency, rate=rate, dim=dim))  # fmt: skip
            typer.echo(json.dumps(runs[-1]), err=True)
    metrics = {"runs": runs, "python": platform.python_version()}
    body = records.save(json_path, setup, metrics, started)
    options.plot_record(body, json_path, plot_path, plot)
