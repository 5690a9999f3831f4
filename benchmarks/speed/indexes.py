"""`bench index`: flat, HNSW and IVF-PQ indexes over large catalogues, side by side.

For each catalogue size, synthetic item embeddings clustered like a learned table (`clusters`
centres on the unit sphere, each item a centre plus Gaussian noise, L2-normalised; queries
drawn the same way: uniform random vectors have no neighbours worth finding and would
understate every approximate index). Each kind is built by `serving.index_kinds`, the classes
the service uses, with their default parameters; then, for each search-time setting (HNSW
efSearch, IVF nprobe):

- recall@10 against exact search (faiss brute force) over `queries` queries;
- the latency of single queries (k = 10) on one thread, as the service's model thread runs
  them (`latency_queries` of them, after a warm-up): p50 and p99;

and once per build: its wall seconds (faiss uses every core) and the index file's size as the
service caches it (the index's memory: faiss holds in memory what it writes).
Resumable: each (items, kind) result is kept in the record and skipped when run again, so the
slow builds (HNSW at 10,000,000 items) can run in a sitting of their own. Run it alone.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS

K = 10
SEARCH_SETTINGS: dict[str, list[dict[str, int]]] = {  # the search-time parameters tried
    "flat": [{}],
    "hnsw": [{"hnsw_ef_search": ef} for ef in (64, 128, 256)],
    "ivf": [{"ivf_nprobe": probes} for probes in (16, 64)],
    "ivfpq": [{"ivf_nprobe": probes} for probes in (16, 64)],
}


def clustered(
    n: int, centres: np.ndarray, rng: np.random.Generator, noise: float = 0.5
) -> np.ndarray:
    """float32 `[n, d]` unit rows: a random centre each plus noise (std `noise / sqrt(d)`)."""
    dim = centres.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 1_000_000):  # in chunks: no n-sized temporaries
        rows = out[start : start + 1_000_000]
        rows[:] = centres[rng.integers(0, len(centres), len(rows))]
        rows += rng.standard_normal(rows.shape, dtype=np.float32) * (noise / np.sqrt(dim))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def catalogue(items: int, dim: int, clusters: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The table `[items + 1, dim]` (row 0 padding) and `count` queries around the same centres."""
    rng = np.random.default_rng(items)
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    table = np.zeros((items + 1, dim), dtype=np.float32)
    table[1:] = clustered(items, centres, rng)
    return table, clustered(count, centres, rng)


def _latencies_ms(index: Any, queries: np.ndarray) -> dict[str, float]:
    """p50 and p99 of single-query searches on one thread (five warm-up queries first)."""
    import faiss

    faiss.omp_set_num_threads(1)
    try:
        options.search_seconds(index, queries[:5], K)  # warm-up
        took = options.search_seconds(index, queries, K) * 1000
    finally:
        faiss.omp_set_num_threads(os.cpu_count() or 1)
    return {"search_p50_ms": round(float(np.percentile(took, 50)), 3),
            "search_p99_ms": round(float(np.percentile(took, 99)), 3)}  # fmt: skip


def _built(kind: str, table: np.ndarray, pq_m: int) -> tuple[Any, dict[str, Any]]:
    """Build one kind over `table` `[n + 1, d]`: the index and what the build cost."""
    from serving.index_kinds import FlatIndex, HNSWIndex, IndexParams, IVFIndex, IVFPQIndex

    kinds: dict[str, type[FlatIndex | HNSWIndex | IVFIndex]] = {
        "flat": FlatIndex, "hnsw": HNSWIndex, "ivf": IVFIndex, "ivfpq": IVFPQIndex
    }  # fmt: skip
    start = time.perf_counter()
    index = kinds[kind](table, IndexParams(kind=kind, pq_m=pq_m))
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.faiss"
        index.save(path)
        size = path.stat().st_size / 2**20
    cost = {"build_seconds": round(seconds, 2), "index_file_mib": round(size, 1),
            "index": index.describe()}  # fmt: skip
    return index, cost


def measure_kind(
    kind: str, table: np.ndarray, queries: np.ndarray, exact: np.ndarray, setting: dict[str, Any]
) -> dict[str, Any]:
    """One kind's build cost, and recall and latency at each of its search settings."""
    from serving.index_recall import recall_against

    index, cost = _built(kind, table, setting.get("pq_m", 0))
    timed = queries[: setting["latency_queries"]]
    searches: list[dict[str, Any]] = []
    for search in SEARCH_SETTINGS[kind]:
        index.params = dataclasses.replace(index.params, **search)
        found, _ = index.search(queries, K)
        recall = recall_against(found, exact)
        searches.append({**search, f"recall@{K}": round(recall, 4), **_latencies_ms(index, timed)})
        typer.echo(f"  {kind} {search or ''}: recall@{K} {recall:.3f}, {searches[-1]}")
    return {"kind": kind, **cost, "search": searches}


def run_size(items: int, kinds: list[str], setting: dict[str, Any], out: Path) -> None:
    """Every kind at `items` items that `out` does not hold yet; each row saved as it ends."""
    from serving.index_recall import exact_top_k

    todo = [kind for kind in kinds if _load(out, setting)[0].get(f"{items}/{kind}") is None]
    if not todo:
        return
    table, queries = catalogue(items, setting["dim"], setting["clusters"], setting["queries"])
    start = time.perf_counter()
    exact = exact_top_k(table[1:], queries, K)
    typer.echo(f"{items:,} items: exact top {K} in {time.perf_counter() - start:.1f} s")
    for kind in todo:
        before = records.load_1m()
        row = measure_kind(kind, table, queries, exact, setting)
        row = {
            "items": items,
            **row,
            "load_avg_1m": [before, records.load_1m()],
        }
        started = records.start()
        done, seconds = _load(out, setting)
        done[f"{items}/{kind}"] = row
        rows = sorted(done.values(), key=lambda r: (r["items"], r["kind"]))
        body = records.save(out, setting, {"rows": rows}, started, earlier_seconds=seconds)
        options.plot_record(body, out, out.with_suffix(".png"), plot)


def _load(out: Path, setting: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The rows `out` holds ({} when none), and the wall seconds they took.

    Raises:
        typer.BadParameter: `out` holds rows of another setting (never overwritten).
        RecsysInputError: `out` is not a record (a truncated file).

    """
    if not out.is_file():
        return {}, 0.0
    record = records.read(out)
    if record["config"] != setting:
        raise typer.BadParameter(
            f"{out} holds results of another setting ({record['config']}): "
            "choose another --out", param_hint="--out",
        )  # fmt: skip
    rows = {f"{row['items']}/{row['kind']}": row for row in record["metrics"]["rows"]}
    return rows, record["wall_seconds"] or 0.0


def plot(record: dict[str, Any], path: Path) -> None:
    """recall@10 against p99 single-query latency, one point per kind and search setting."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    markers = {"flat": "s", "hnsw": "o", "ivf": "^", "ivfpq": "D"}
    rows = record["metrics"]["rows"]
    sizes = sorted({row["items"] for row in rows})
    for row in rows:
        colour = f"C{sizes.index(row['items'])}"
        for search in row["search"]:
            ax.scatter(search["search_p99_ms"], search[f"recall@{K}"], color=colour,
                       marker=markers.get(row["kind"], "x"))  # fmt: skip
        label = f"{row['kind']} {row['items']:,}"
        last = row["search"][-1]
        ax.annotate(label, (last["search_p99_ms"], last[f"recall@{K}"]), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("p99 single-query search, ms (one thread, log scale)")
    ax.set_ylabel(f"recall@{K} against exact search")
    ax.set_title(f"d = {record['config']['dim']}, clustered synthetic embeddings", fontsize=9)
    options.save_figure(fig, path)


def index(
    items: Annotated[
        str, typer.Option(help="Comma-separated catalogue sizes.")
    ] = "1000000,10000000",
    kinds: Annotated[
        str, typer.Option(help="Comma-separated: flat, hnsw, ivf, ivfpq.")
    ] = "flat,ivfpq,hnsw",
    dim: Annotated[int, typer.Option(min=1, help="Embedding size d.")] = 64,
    clusters: Annotated[
        int, typer.Option(min=1, help="Centres of the synthetic embeddings.")
    ] = 4096,
    queries: Annotated[int, typer.Option(min=1, help="Queries for recall@10.")] = 1000,
    latency_queries: Annotated[int, typer.Option(min=1, help="Single-query searches timed.")] = 200,
    pq_m: Annotated[
        int, typer.Option(min=0, help="IVF-PQ bytes an item (0: the service's default).")
    ] = 0,
    out: Annotated[Path, typer.Option(help="Result record (a PNG beside it).")] = RESULTS
    / "index_comparison/index_comparison.json",
) -> None:
    """Flat vs HNSW vs IVF-PQ: build time, memory, p99 search and recall@10 (resumable)."""
    chosen = options.names(kinds, "kinds")
    unknown = set(chosen) - set(SEARCH_SETTINGS)
    if unknown:
        raise typer.BadParameter(f"unknown index kinds {sorted(unknown)}", param_hint="--kinds")
    require_writable({"--out": out})
    setting = {"dim": dim, "clusters": clusters, "queries": queries, "k": K,
               "latency_queries": latency_queries, "noise": 0.5,
               **({"pq_m": pq_m} if pq_m else {})}  # fmt: skip
    for size in options.ints(items, "items"):
        run_size(size, chosen, setting, out)
