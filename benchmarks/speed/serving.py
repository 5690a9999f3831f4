"""`bench serving`: load-test the real server on synthetic catalogues, or on a trained bundle.

For each size: write a synthetic bundle (`synthetic_bundles`: random unit item rows, or with
`--like` rows drawn like a trained table's, and a randomly initialised default query tower:
latency does not depend on the weights); or, with `--bundle`, serve a trained one as it is
(`served_catalogue`). Then start `recsys serve` as a subprocess (or `--replicas`
of them behind the shipped nginx balancer: `serving_target`), wait for /ready, then run two
bounded loads of POST /recommend (anonymous sessions of 20 random items, k = 10) from
keep-alive connections on localhost (`load_client`): an open loop at a fixed rate and a closed
loop (the saturation throughput). With `--profile`, a third closed loop under
`serving_profile` says where the CPU went. Also times the raw `index.search` and its recall@10
against exact search at several HNSW efSearch values. The client runs on uvloop, like the
server, and shares the machine's cores with it.
"""

from __future__ import annotations

import json
import math
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
import uvloop

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS
from benchmarks.speed import load_client, served_catalogue
from benchmarks.speed.balancer import require_nginx
from benchmarks.speed.raw_search import HISTORY, K, raw_search
from benchmarks.speed.served_catalogue import ServedCatalogue
from benchmarks.speed.serving_profile import Profile, require_py_spy
from benchmarks.speed.serving_target import ServingTarget
from benchmarks.speed.synthetic_bundles import TrainedLaw, trained_table
from data.errors import RecsysInputError


def run_size(
    served: ServedCatalogue, work: Path, setting: dict[str, Any], made_s: float
) -> dict[str, Any]:
    """Raw search, servers and loads for one catalogue, `made_s` seconds to write its bundle.

    `setting`: the bench's options (index, duration, concurrency, rate, dim, ef_search,
    replicas, profile).
    """
    kind, ef_search = setting["index"], setting["ef_search"]
    t0 = time.perf_counter()
    sessions = load_client.bodies(served.item_ids, 500, seed=1)
    raw = raw_search(served.bundle_dir, sessions, kind, ef_search, served.queries)  # caches
    index_s = time.perf_counter() - t0
    with ServingTarget(served.home, kind, ef_search, setting["replicas"], work) as target:
        loads = _loads(target, load_client.bodies(served.item_ids, 5000, seed=2), setting)
    return {
        "items": len(served.item_ids),
        "dim": raw["index"]["dim"],
        "replicas": setting["replicas"],
        "bundle_write_s": round(made_s, 1),  # a trained bundle's: linking and publishing it
        "index_build_and_raw_search_s": round(index_s, 1),
        "server_ready_s": round(target.ready_s, 1),
        "raw": raw,
        "loads": loads,
    }


def _catalogues(
    sizes: list[int], work: Path, dim: int, law: TrainedLaw | None, bundle: Path | None
) -> Iterator[tuple[ServedCatalogue, float]]:
    """Each catalogue to serve (the trained bundle, else one synthetic per size), timed."""
    makers = (
        [lambda: served_catalogue.trained(bundle, work)]
        if bundle is not None
        else [lambda n=n: served_catalogue.synthetic(n, dim, work, law) for n in sizes]
    )
    for make in makers:
        t0 = time.perf_counter()
        served = make()
        yield served, time.perf_counter() - t0


def _loads(
    target: ServingTarget, bodies: list[bytes], setting: dict[str, Any]
) -> list[dict[str, Any]]:
    """The open loop, the closed loop and, with `profile`, a closed loop under `Profile`."""
    duration, clients, port = setting["duration"], setting["concurrency"], target.port

    def load(rate: float | None, seconds: float = duration) -> dict[str, Any]:
        return uvloop.run(load_client.run_load(port, bodies, seconds, clients, rate))

    load(None, 2.0)  # warm-up
    loads = [load(setting["rate"]), load(None)]
    if setting["profile"]:
        with Profile(target.server_pids(), duration, target.balancer_pids()) as profile:
            profiled = load(None)
        loads.append(
            {**profiled, "mode": "closed loop, profiled", **profile.result(profiled["requests"])}
        )
    return loads


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
    items: Annotated[
        str | None,
        typer.Option(help="Comma-separated catalogue sizes.", show_default="100000,1000000"),
    ] = None,
    duration: Annotated[float, typer.Option(help="Seconds per load phase.")] = 30.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Concurrent client connections.")] = 32,
    rate: Annotated[float, typer.Option(help="Open-loop request rate (req/s).")] = 300.0,
    index: Annotated[str, typer.Option(help="Index kind: auto|flat|hnsw|ivf|ivfpq.")] = "hnsw",
    dim: Annotated[
        int | None,
        typer.Option(
            min=1, help="Embedding width d (the model's default: 256).", show_default="64"
        ),
    ] = None,
    like: Annotated[
        Path | None,
        typer.Option(
            help="A trained bundle (or its item_embeddings.npy): item rows drawn from the "
            "Gaussian of its rows (their mean and covariance), recall measured with draws of "
            "the same law, instead of random unit rows.",
            show_default="random unit rows",
        ),
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(
            help="A trained bundle served as it is (its items, rows and query tower), instead "
            "of synthetic catalogues: its size and width are its own (no --items, --dim or "
            "--like with it); sessions are drawn from its items.",
            show_default="synthetic catalogues",
        ),
    ] = None,
    ef_search: Annotated[int, typer.Option(min=1, help="The server's HNSW efSearch.")] = 64,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Server processes; more than one are loaded through deploy/nginx.conf's "
            "balancer on loopback (needs nginx).",
        ),
    ] = 1,
    profile: Annotated[
        bool, typer.Option(help="Add a closed loop under py-spy and CPU clocks (where time goes).")
    ] = False,
    work_dir: Annotated[
        Path | None, typer.Option(help="Where bundles go.", show_default="a temporary folder")
    ] = None,
    json_path: Annotated[Path, typer.Option("--out", help="The result record.")] = RESULTS
    / "serving/serving.json",
    plot_path: Annotated[
        Path, typer.Option("--plot", help="Latency and throughput plot (PNG).")
    ] = RESULTS / "serving/serving.png",
) -> None:
    """Load-test `recsys serve` on synthetic catalogues or a trained bundle; req/s, p99, errors."""
    sizes, dim, law = _table_source(items, dim, like, bundle)
    for name, value in (("--rate", rate), ("--duration", duration)):
        if not (math.isfinite(value) and value > 0):
            raise RecsysInputError(f"{name} must be a finite number > 0, got {value}")
    require_writable({"--out": json_path, "--plot": plot_path})
    if profile:
        require_py_spy()
    if replicas > 1:
        require_nginx()
    setting = {"index": index, "duration": duration, "concurrency": concurrency, "rate": rate,
               "dim": dim, "ef_search": ef_search, "replicas": replicas,
               "profile": profile}  # fmt: skip
    setup = {
        "items": sizes, "duration_s": duration, "concurrency": concurrency,
        "open_loop_rate": rate, "index": index, "hnsw_ef_search": ef_search,
        "request": f"POST /recommend, {HISTORY} random items, k={K}",
        "dim": dim, "embeddings": _table_text(dim, law, bundle),
        "like_table": None if law is None else law.summary(),
        "server": "recsys serve: uvicorn, uvloop + httptools, opportunistic request batching",
        "replicas": replicas,
        "balancer": "deploy/nginx.conf on loopback (one worker)" if replicas > 1 else None,
        "client": "uvloop keep-alive HTTP/1.1 on localhost, same machine as the server",
    }  # fmt: skip
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-bench-") as tmp:
        work = work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = []
        for served, made_s in _catalogues(sizes, work, dim, law, bundle):
            runs.append(run_size(served, work, setting, made_s))
            typer.echo(json.dumps(runs[-1]), err=True)
    metrics = {"runs": runs, "python": platform.python_version()}
    body = records.save(json_path, setup, metrics, started)
    options.plot_record(body, json_path, plot_path, plot)


def _table_source(
    items: str | None, dim: int | None, like: Path | None, bundle: Path | None
) -> tuple[list[int], int, TrainedLaw | None]:
    """Sizes, width and row law from the options; a trained bundle's own size and width."""
    if bundle is None:
        width = 64 if dim is None else dim
        law = None if like is None else _law(like, width)
        return options.ints(items or "100000,1000000", "items"), width, law
    for name, value in (("--items", items), ("--dim", dim), ("--like", like)):
        if value is not None:
            raise RecsysInputError(
                f"{name} does not go with --bundle: its size, width and rows are the bundle's"
            )
    num_items, width = served_catalogue.trained_shape(bundle)
    return [num_items], width, None


def _law(like: Path, dim: int) -> TrainedLaw:
    """The Gaussian of `--like`'s rows, refused unless they are `dim` wide."""
    rows = trained_table(like)
    if rows.shape[1] != dim:
        raise RecsysInputError(f"--like {like}: its rows are {rows.shape[1]} wide, --dim is {dim}")
    return TrainedLaw(rows, np.random.default_rng(0))


def _table_text(dim: int, law: TrainedLaw | None, bundle: Path | None) -> str:
    """What the record says of the item table and the recall queries."""
    if bundle is not None:
        return (
            f"a trained bundle served as it is ({bundle.resolve().name}: its item rows, d={dim}, "
            "and its query tower); recall queries: the load's sessions through its tower"
        )
    if law is None:
        return f"random L2-normalised, d={dim}; default query tower, random weights"
    return (
        f"rows drawn from the Gaussian of a trained table's {law.rows:,} item rows (their mean "
        f"and covariance; 90% of the variance in {law.effective_rank()} of {dim} directions)"
        f"{', put on the unit sphere as its rows are' if law.unit else ''}, "
        f"d={dim}; recall queries drawn from the same law; default query tower, random weights"
    )
