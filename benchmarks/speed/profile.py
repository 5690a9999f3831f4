"""`bench profile`: where a real training step's time goes, phase by phase.

The measurement lives in `benchmarks.speed.step_profile`, imported only when the benchmark runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS, dataset_source
from data.errors import RecsysInputError


def profile_command(
    dataset: Annotated[
        str,
        typer.Option("--dataset", help="Dataset name (in $RECSYS_DATASETS) or log path."),
    ] = "amazon-beauty",
    samplers: Annotated[
        str, typer.Option("--samplers", help="`full` and/or sampler names, comma-separated.")
    ] = "full,uniform",
    steps: Annotated[
        int,
        typer.Option("--steps", min=0, help="Training steps, warm-up included (0: a whole epoch)."),
    ] = 0,
    num_negatives: Annotated[
        int | None,
        typer.Option(
            "--num-negatives", min=1, help="m of the samplers.", show_default="each one's own"
        ),
    ] = None,
    threads: Annotated[int, typer.Option("--threads", min=1, help="torch CPU threads.")] = 1,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="<key=value>", help="Config override section.key=value (repeatable)."
        ),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="Scratch home for the dataset.", show_default="a temporary folder"),
    ] = None,
    json_path: Annotated[Path, typer.Option("--out", help="Result record.")] = RESULTS
    / "profile/profile.json",
    plot_path: Annotated[Path, typer.Option("--plot", help="Result plot (PNG).")] = RESULTS
    / "profile/profile.png",
) -> None:
    """Profile training steps and one validation round on a real dataset, per sampler."""
    from benchmarks.speed import step_profile  # torch: only when run

    if 0 < steps <= (warmup := step_profile.WARMUP_STEPS):
        raise RecsysInputError(
            f"--steps {steps}: the first {warmup} steps warm up and are not profiled; "
            f"give more than {warmup}, or 0 for a whole epoch"
        )
    require_writable({"--out": json_path, "--plot": plot_path})
    config = {"dataset": dataset, "samplers": options.names(samplers, "samplers"),
              "steps": steps, "num_negatives": num_negatives, "threads": threads,
              "overrides": list(set_ or [])}  # fmt: skip
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-profile-") as tmp:
        metrics = step_profile.run_profiles(home or Path(tmp), dataset_source(dataset), config)
    precision = step_profile.shared_precision(metrics)
    body = records.save(json_path, config, metrics, started, precision=precision, threads=threads)
    options.plot_record(body, json_path, plot_path, step_profile.plot)
