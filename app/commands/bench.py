"""`recsys bench ...`: reproducible benchmarks; each lives in its own module under app/bench/."""

from __future__ import annotations

import typer

from app.bench import (
    data_pipeline,
    ddp,
    events,
    indexes,
    profile,
    quality,
    samplers,
    serving,
    train_step,
)

bench_app = typer.Typer(
    help="Reproducible benchmarks; results go to benchmarks/results/ (see docs/benchmarks.md).",
    no_args_is_help=True,
)

BENCHMARKS = (data_pipeline, ddp, events, indexes, profile, quality, samplers, serving, train_step)


def register(app: typer.Typer) -> None:
    """Attach `recsys bench` and its subcommands."""
    for module in BENCHMARKS:
        module.register(bench_app)
    app.add_typer(bench_app, name="bench")
