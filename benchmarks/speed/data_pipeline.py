"""`bench data-pipeline`: time synth, ingest and split on a synthetic log.

Steps, each timed on its own in a fresh temporary workspace:
1. `synth`: generate N events (N/20 users, N/10 items) and write them as CSV;
2. `ingest`: ingest that CSV (parse, validate, duplicate check, write part and vocabularies);
3. `reingest`: ingest the same CSV again, so every row is a duplicate of a stored event
   (the anti-join against the whole store at full size);
4. `split_loo` and `split_time`: leave-one-out and a time cut at the median timestamp.
The result (seconds per step, events per second, peak RSS) is a record (`--out`).
"""

from __future__ import annotations

import json
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import polars as pl
import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.paths import RESULTS
from data.ingest import ingest_files
from data.split import build_splits
from data.store import read_events
from data.synth import generate_events
from data.workspace import Workspace

T = TypeVar("T")


def _timed(steps: dict[str, float], name: str, fn: Callable[[], T]) -> T:
    # CPU seconds (all threads) next to wall seconds: on a shared machine the wall time
    # depends on what else runs, the CPU time much less.
    started, cpu = time.perf_counter(), time.process_time()
    out = fn()
    steps[name] = round(time.perf_counter() - started, 3)
    steps[f"{name}_cpu"] = round(time.process_time() - cpu, 3)
    sys.stderr.write(f"{name}: {steps[name]:.2f} s wall, {steps[name + '_cpu']:.2f} s CPU\n")
    return out


def run_benchmark(events: int, seed: int = 0) -> dict[str, Any]:
    """Run the steps of the module docstring on `events` synthetic events; the metrics."""
    users, items = max(1, events // 20), max(10, events // 10)
    steps: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="recsys-bench-") as tmp:
        csv = Path(tmp) / "events.csv"
        ws = Workspace(Path(tmp) / "home")
        frame = _timed(steps, "synth", lambda: generate_events(users, items, events, seed))
        _timed(steps, "write_csv", lambda: frame.write_csv(csv))
        csv_mb = round(csv.stat().st_size / 2**20, 1)
        frame = frame.clear()  # free the log before ingest measures its own memory
        first = _timed(steps, "ingest", lambda: ingest_files(ws, [csv]))
        again = _timed(steps, "reingest", lambda: ingest_files(ws, [csv]))
        loo = _timed(steps, "split_loo", lambda: build_splits(ws, "loo"))
        cutoff = int(read_events(ws).select(pl.col("timestamp").median()).collect().item())
        cut = _timed(steps, "split_time", lambda: build_splits(ws, "time", cutoff=cutoff))
    return {
        "users": users,
        "items": items,
        "csv_mb": csv_mb,
        "seconds": steps,
        "ingest_plus_split_loo_s": round(steps["ingest"] + steps["split_loo"], 3),
        "ingest_events_per_s": round(events / max(steps["ingest"], 1e-9)),
        "accepted": first.accepted,
        "reingest_rejected": again.rejected,
        "loo": {"train_users": loo.train.height, "val": loo.val.height, "test": loo.test.height},
        "time_cut": {"cutoff": cutoff, "val": cut.val.height, "test": cut.test.height},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "python": platform.python_version(),
        "polars": pl.__version__,
        "platform": platform.platform(),
    }


def data_pipeline(
    events: Annotated[int, typer.Option("--events", min=1, help="Synthetic events.")] = 1_000_000,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Random seed of the synthetic log.")
    ] = 0,
    json_path: Annotated[
        Path, typer.Option("--out", help="Where to write the result record.")
    ] = RESULTS / "data_pipeline/data_pipeline.json",
) -> None:
    """Time synth, ingest (+ duplicate re-ingest) and splits on a synthetic log."""
    require_writable({"--out": json_path})
    started = records.start()
    result = run_benchmark(events, seed)
    records.save(json_path, {"events": events, "seed": seed}, result, started)
    wall = {k: v for k, v in result["seconds"].items() if not k.endswith("_cpu")}
    sys.stdout.write(json.dumps(wall) + f"\nwrote {json_path}\n")
