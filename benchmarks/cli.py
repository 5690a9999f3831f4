"""The benchmarks' command line: `python -m benchmarks <command>`, and `recsys bench` in a checkout.

Each command lives in its own module (`speed/` for timings, `sweeps/` for model quality); this
module only names them. Bad input exits 2 with one line on stderr, as `recsys` does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from app.cli_common import setup_logging
from benchmarks.docs_pages.pages import docs_pages
from benchmarks.speed import (
    data_pipeline,
    ddp,
    events,
    indexes,
    profile,
    quickstart,
    samplers,
    serving,
    train_step,
)
from benchmarks.sweeps import quality, sweep_report, test_once
from data.errors import RecsysInputError

bench_app = typer.Typer(
    help="Reproducible benchmarks; each run writes a record under benchmarks/results/<study>/ "
    "(docs/benchmarks/). The studies run as `python -m benchmarks.studies.<name>`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
COMMANDS: dict[str, Callable[..., Any]] = {
    "data-pipeline": data_pipeline.data_pipeline,
    "ddp": ddp.ddp,
    "docs-pages": docs_pages,
    "events": events.bench_events,
    "index": indexes.index,
    "profile": profile.profile_command,
    "quality": quality.quality_command,
    "quickstart": quickstart.quickstart,
    "quality-report": sweep_report.report_command,
    "quality-test": test_once.quality_test,
    "samplers": samplers.samplers,
    "serving": serving.bench_serving,
    "train-step": train_step.train_step,
}
for name, command in COMMANDS.items():
    bench_app.command(name)(command)


@bench_app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    if verbose:  # else as the caller set it up (`main`, or `recsys -v bench ...`)
        setup_logging(verbose)


def main() -> None:
    """Run one benchmark command; bad input exits 2 with one line on stderr."""
    setup_logging(False)
    try:
        bench_app(prog_name="python -m benchmarks")
    except RecsysInputError as err:
        lines = str(err).strip().splitlines()
        sys.stderr.write(f"error: {lines[0] if lines else type(err).__name__}\n")
        sys.exit(2)
