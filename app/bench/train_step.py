"""`recsys bench train-step`: milliseconds per training step, full softmax against each sampler.

The measurement lives in `app.bench.step_timing`, imported only when the benchmark runs so that
the rest of the CLI starts without loading torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.bench import options
from app.cli_common import require_writable
from data.errors import RecsysInputError

DEFAULT_SAMPLERS = "full,uniform,popularity,in-batch,mixed,exact,quadratic,rff"


def train_step(
    items: Annotated[str, typer.Option("--items", help="Catalogue sizes, comma-separated.")] = (
        "10000,100000,1000000"
    ),
    samplers: Annotated[
        str, typer.Option("--samplers", help="`full` and/or sampler names, comma-separated.")
    ] = DEFAULT_SAMPLERS,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Queries per step B.")] = 256,
    num_negatives: Annotated[int, typer.Option("--num-negatives", min=1, help="m.")] = 1024,
    dim: Annotated[int, typer.Option("--dim", min=1, help="Embedding size d.")] = 64,
    towers: Annotated[
        str, typer.Option("--towers", help="Query towers, comma-separated: sasrec, mean.")
    ] = "sasrec,mean",
    history: Annotated[int, typer.Option("--history", min=1, help="Items per history L.")] = 20,
    tapas_ratios: Annotated[
        str,
        typer.Option(
            "--tapas-ratios",
            help="tapas presample factors r, comma-separated: one row per r (`tapas_ratio`).",
        ),
    ] = "8",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed steps per cell.")] = 5,
    threads: Annotated[int, typer.Option("--threads", min=1, help="CPU threads of torch.")] = 2,
    json_path: Annotated[Path, typer.Option("--json", help="Result JSON.")] = options.RESULTS
    / "train_step.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = options.RESULTS
    / "train_step.png",
) -> None:
    """Time whole training steps (forward, backward, optimisers, sampler update) per sampler."""
    from app.bench.step_timing import (  # torch: only when run
        plot,
        run_benchmark,
        speedups,
        tapas_costs,
    )
    from training.samplers import SAMPLERS

    require_writable({"--json": json_path, "--plot": plot_path})
    names = options.names(samplers, "samplers")
    unknown = [s for s in names if s != "full" and s not in SAMPLERS]
    if unknown:
        known = ", ".join(["full", *sorted(SAMPLERS)])
        raise RecsysInputError(f"--samplers: unknown {', '.join(unknown)}; known: {known}")
    args = {
        "batch": batch, "num_negatives": num_negatives, "dim": dim,
        "length": history, "repeats": repeats, "threads": threads,
        "tapas_ratios": options.ints(tapas_ratios, "tapas-ratios"),
    }  # fmt: skip
    tower_names = options.names(towers, "towers")
    payload = run_benchmark(options.ints(items, "items"), names, tower_names, args)
    payload["speedup_vs_full"] = speedups(payload)
    payload["tapas_cost_vs_smallest_ratio"] = tapas_costs(payload)
    options.write_results(payload, json_path, plot_path, plot)


def register(bench_app: typer.Typer) -> None:
    """Attach this benchmark's subcommand."""
    bench_app.command("train-step")(train_step)
