"""The memory an api replica's item index takes, measured: `python -m scripts.index_memory`.

For each index kind of `serving.index_kinds` with the server's default parameters, one fresh
process holds a random L2-normalised float32 table [n + 1, d] as a loaded bundle does, builds
the index from it as the server does (on `--threads` threads: `RECSYS_THREADS`, default 1),
and reports the growth of its resident memory (VmRSS) over the table, the peak (VmHWM) and the
index's serialised size, each per million items. Every kind but HNSW runs at `--items`
(default 1e6); HNSW, whose build takes long on a small machine, at `--hnsw-items` (default
1e5), its per-item figures scaled (they do not depend on n). Writes one record per kind
(`benchmarks/results/index_memory/<kind>.json`, or under `--out`) and prints its metrics; the
serving guide's memory table is generated from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

from benchmarks import records
from benchmarks.paths import RESULTS

KINDS = ("flat", "hnsw", "ivf", "ivfpq")


def _kib(field: str) -> int:
    """`field` of /proc/self/status (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(kind: str, items: int, dim: int, threads: int) -> dict[str, float]:
    """Build one index of `kind` over a random table and measure it (in this process)."""
    import faiss
    import numpy as np

    from serving.index_kinds import FlatIndex, HNSWIndex, IndexParams, IVFIndex, IVFPQIndex
    from serving.threads import limit_threads

    limit_threads(threads)

    classes = {"flat": FlatIndex, "hnsw": HNSWIndex, "ivf": IVFIndex, "ivfpq": IVFPQIndex}
    rng = np.random.default_rng(0)
    table = rng.standard_normal((items + 1, dim), dtype=np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    before = _kib("VmRSS")
    start = time.perf_counter()
    index = classes[kind](table, IndexParams(kind=kind))
    seconds = time.perf_counter() - start
    grown, peak = _kib("VmRSS") - before, _kib("VmHWM") - before
    serialised = faiss.serialize_index(index._faiss).nbytes  # the faiss structure itself
    per_million = 1e6 / items
    return {
        "kind": kind, "items": items, "dim": dim, "threads": threads,
        "build_seconds": round(seconds, 1),
        "table_mb_per_1e6": round(table.nbytes * per_million / 1e6, 1),
        "index_rss_mb_per_1e6": round(grown * per_million / 1e6, 1),
        "index_serialised_mb_per_1e6": round(serialised * per_million / 1e6, 1),
        "build_peak_over_table_mb_per_1e6": round(peak * per_million / 1e6, 1),
    }  # fmt: skip


def _child(kind: str, items: int, dim: int, threads: int, out: mp.Queue) -> None:
    out.put(measure(kind, items, dim, threads))


def _config(kind: str, items: int, args: argparse.Namespace) -> dict[str, object]:
    """What a kind's run measured: its size, width, threads and the server's index defaults."""
    from serving.index_kinds import IndexParams

    params = dataclasses.asdict(IndexParams(kind=kind))
    return {"items": items, "dim": args.dim, "threads": args.threads, "index": params}


def main(argv: list[str]) -> int:
    """Measure every kind, each in a fresh process; one record each, its metrics on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--hnsw-items", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "index_memory")
    args = parser.parse_args(argv)
    ctx = mp.get_context("spawn")  # a fresh process: no memory left over from another kind
    for kind in args.kinds:
        items = args.hnsw_items if kind == "hnsw" else args.items
        queue, started = ctx.Queue(), records.start()
        child = ctx.Process(target=_child, args=(kind, items, args.dim, args.threads, queue))
        child.start()
        result = queue.get()
        child.join()
        path = args.out / f"{kind}.json"
        records.save(path, _config(kind, items, args), result, started, threads=args.threads)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
