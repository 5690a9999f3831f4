"""`recsys bench profile`: where a real training step's time goes, phase by phase.

The measurement lives in `app.bench.step_profile`, imported only when the benchmark runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from app.bench import options
from app.cli_common import require_writable
from data.errors import RecsysInputError


def profile_command(
    dataset: Annotated[
        str, typer.Option("--dataset", help="Dataset name or log path (as `recsys train`).")
    ] = "amazon-beauty",
    samplers: Annotated[
        str, typer.Option("--samplers", help="`full` and/or sampler names, comma-separated.")
    ] = "full,uniform",
    steps: Annotated[
        int,
        typer.Option("--steps", min=0, help="Training steps, warm-up included (0: a whole epoch)."),
    ] = 0,
    threads: Annotated[int, typer.Option("--threads", min=1, help="torch CPU threads.")] = 1,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Config override section.key=value (repeatable)."),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="Scratch home for the dataset (default: a temporary folder)."),
    ] = None,
    json_path: Annotated[Path, typer.Option("--json", help="Result JSON.")] = options.RESULTS
    / "profile.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = options.RESULTS
    / "profile.png",
) -> None:
    """Profile training steps and one validation round on a real dataset, per sampler."""
    from app.bench.step_profile import WARMUP_STEPS, plot, run_profiles  # torch: only when run

    if 0 < steps <= WARMUP_STEPS:
        raise RecsysInputError(
            f"--steps {steps}: the first {WARMUP_STEPS} steps warm up and are not profiled; "
            f"give more than {WARMUP_STEPS}, or 0 for a whole epoch"
        )
    require_writable({"--json": json_path, "--plot": plot_path})
    args = {"steps": steps, "threads": threads, "overrides": list(set_ or [])}
    names = options.names(samplers, "samplers")
    with tempfile.TemporaryDirectory(prefix="recsys-profile-") as tmp:
        payload = run_profiles(home or Path(tmp), dataset, names, args)
    options.write_results(payload, json_path, plot_path, plot)


def register(bench_app: typer.Typer) -> None:
    """Attach this benchmark's subcommand."""
    bench_app.command("profile")(profile_command)
