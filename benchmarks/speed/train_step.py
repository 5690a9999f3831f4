"""`bench train-step`: milliseconds per training step, full softmax against each sampler.

The measurement lives in `benchmarks.speed.step_timing`, imported only when the benchmark runs
so that the rest of the CLI starts without loading torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS
from data.errors import RecsysInputError

DEFAULT_SAMPLERS = "full,uniform,popularity,in-batch,mixed,exact,quadratic,rff"


def train_step(
    items: Annotated[str, typer.Option("--items", help="Catalogue sizes, comma-separated.")] = (
        "10000,100000,1000000"
    ),
    samplers: Annotated[
        str, typer.Option("--samplers", help="`full` and/or sampler names, comma-separated.")
    ] = DEFAULT_SAMPLERS,
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Histories per step B (N = B L queries).")
    ] = 256,
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
            help="tapas presample factors r, comma-separated: one row per r (its `tapas_ratio`).",
        ),
    ] = "8",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed steps per cell.")] = 5,
    threads: Annotated[int, typer.Option("--threads", min=1, help="CPU threads of torch.")] = 2,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Config override section.key=value over every cell's preset (repeatable).",
        ),
    ] = None,
    json_path: Annotated[Path, typer.Option("--out", help="Result record.")] = RESULTS
    / "train_step/train_step.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = RESULTS
    / "train_step/train_step.png",
) -> None:
    """Time whole training steps (forward, backward, optimisers, sampler update) per sampler.

    Each sampler runs with its preset as `recsys train --sampler NAME` applies it, under the
    `--set` overrides; every position of a history is a query unless `--set train.targets=last`.
    """
    from benchmarks.speed.step_timing import plot, run_benchmark  # torch: only when run
    from training.samplers import SAMPLERS

    require_writable({"--out": json_path, "--plot": plot_path})
    names = options.names(samplers, "samplers")
    unknown = [s for s in names if s != "full" and s not in SAMPLERS]
    if unknown:
        known = ", ".join(["full", *sorted(SAMPLERS)])
        raise RecsysInputError(f"--samplers: unknown {', '.join(unknown)}; known: {known}")
    args = {
        "batch": batch, "num_negatives": num_negatives, "dim": dim,
        "length": history, "repeats": repeats, "threads": threads,
        "tapas_ratios": options.ints(tapas_ratios, "tapas-ratios"),
        "overrides": list(set_ or []),
    }  # fmt: skip
    config = {**args, "items": options.ints(items, "items"), "samplers": names,
              "towers": options.names(towers, "towers")}  # fmt: skip
    started = records.start()
    metrics = run_benchmark(config)  # in fp32 unless --set train.precision says otherwise
    used = metrics["precision"]
    body = records.save(json_path, config, metrics, started, precision=used, threads=threads)
    options.plot_record(body, json_path, plot_path, plot)
