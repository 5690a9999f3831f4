"""`bench samplers`: milliseconds per batch of shared negatives, and per update.

The measurement lives in `benchmarks.speed.sampler_timing`, imported only when the benchmark
runs so that the rest of the CLI starts without loading torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS


def samplers(
    items: Annotated[str, typer.Option("--items", help="Catalogue sizes, comma-separated.")] = (
        "10000,100000,1000000"
    ),
    features: Annotated[str, typer.Option("--features", help="RFF frequencies D.")] = "64,128,256",
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats", min=1, help="Timed draws per cell (median and minimum reported)."
        ),
    ] = 5,
    leaf_sizes: Annotated[
        str,
        typer.Option(
            "--leaf-size",
            help="Kernel tree leaf sizes b for rff, comma-separated; 1 gives the paper's "
            "b = ceil(2D / d) (every b is at least that).",
        ),
    ] = "8",
    threads: Annotated[int, typer.Option("--threads", min=1, help="CPU threads of torch.")] = 2,
    json_path: Annotated[Path, typer.Option("--out", help="Result record.")] = RESULTS
    / "samplers/samplers.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = RESULTS
    / "samplers/samplers.png",
) -> None:
    """Time drawing 1024 shared negatives for 256 queries, and updating 10,000 rows."""
    from benchmarks.speed.sampler_timing import plot, run_benchmark  # torch: only when run

    require_writable({"--out": json_path, "--plot": plot_path})
    config = {
        "items": options.ints(items, "items"), "features": options.ints(features, "features"),
        "repeats": repeats, "leaf_sizes": options.ints(leaf_sizes, "leaf-size"),
        "threads": threads,
    }  # fmt: skip
    started = records.start()
    body = records.save(json_path, config, run_benchmark(config), started, threads=threads)
    options.plot_record(body, json_path, plot_path, plot)
