"""`recsys bench samplers`: milliseconds per batch of shared negatives, and per update.

The measurement lives in `app.bench.sampler_timing`, imported only when the benchmark runs so
that the rest of the CLI starts without loading torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.bench import options
from app.cli_common import require_writable


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
    json_path: Annotated[Path, typer.Option("--json", help="Result JSON.")] = options.RESULTS
    / "samplers.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = options.RESULTS
    / "samplers.png",
) -> None:
    """Time drawing 1024 shared negatives for 256 queries, and updating 10,000 rows."""
    from app.bench.sampler_timing import plot, run_benchmark  # torch: only when run

    require_writable({"--json": json_path, "--plot": plot_path})
    payload = run_benchmark(
        options.ints(items, "items"),
        options.ints(features, "features"),
        repeats,
        options.ints(leaf_sizes, "leaf-size"),
        threads,
    )
    options.write_results(payload, json_path, plot_path, plot)


def register(bench_app: typer.Typer) -> None:
    """Attach this benchmark's subcommand."""
    bench_app.command("samplers")(samplers)
