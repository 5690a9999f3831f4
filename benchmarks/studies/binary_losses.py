"""Whether the binary losses (negative sampling, NCE) learn in this model, and when.

Usage: python -m benchmarks.studies.binary_losses [--out DIR] [--scratch DIR]

The synthetic demo log (`recsys train --dataset synthetic`: 2,000 users, 1,000 items, planted
successors), uniform negatives, 8 epochs, one thread each, the default model; per run (loss,
m, per-query draws, temperature) the record `DIR/<name>.json` (default DIR:
`results/binary_losses`), skipped when it exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP

# loss, m, per_query, temperature
RUNS = (
    ("sampled_softmax", 64, False, 0.05), ("negative_sampling", 64, False, 0.05),
    ("nce", 64, False, 0.05), ("negative_sampling", 64, False, 0.2),
    ("negative_sampling", 64, False, 1.0), ("negative_sampling", 1, False, 0.05),
    ("negative_sampling", 8, False, 0.05), ("negative_sampling", 1, True, 0.05),
    ("negative_sampling", 8, True, 0.05), ("negative_sampling", 64, True, 0.05),
    ("nce", 8, True, 0.05),
)  # fmt: skip


def train_args(loss: str, m: int, per_query: bool, tau: float) -> list[str]:
    """`recsys train` arguments of one run (its home and `--json` aside)."""
    sets = [f"sampler.per_query={str(per_query).lower()}", f"loss.name={loss}",
            f"model.temperature={tau}", "train.threads=1", "train.patience=8"]  # fmt: skip
    flags = ["--dataset", "synthetic", "--sampler", "uniform", "--num-negatives", str(m)]
    return [*flags, *(arg for s in sets for arg in ("--set", s)), "--max-epochs", "8"]


def main(
    out: Annotated[Path, typer.Option(help="Result folder.")] = RESULTS / "binary_losses",
    work: Annotated[Path, typer.Option("--scratch", help="The runs' homes and logs.")] = TEMP
    / "binary-losses",
) -> None:
    """Train each run without a record; write its record."""
    for loss, m, per_query, tau in RUNS:
        name = f"{loss}-m{m}-perquery_{str(per_query).lower()}-tau{tau}"
        if (out / f"{name}.json").exists():
            continue
        started = records.start()
        args = train_args(loss, m, per_query, tau)
        cmd = [sys.executable, "-m", "app", "train", "--home", str(work / name), *args, "--json"]
        work.mkdir(parents=True, exist_ok=True)
        with (work / f"{name}.log").open("w") as log:
            done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, stderr=log,
                                  stdout=subprocess.PIPE, text=True, check=True)  # fmt: skip
        result = json.loads(done.stdout)
        metrics = {
            "name": name, "epochs": result["epochs"],
            "val_ndcg@10": result["metrics"]["val"]["ndcg@10"],
            "test_ndcg@10": result["metrics"]["test"]["ndcg@10"],
            "seconds_per_epoch": result["seconds_per_epoch"],
        }  # fmt: skip
        config = {"loss": loss, "m": m, "per_query": per_query, "temperature": tau, "args": args}
        typer.echo(json.dumps(metrics))
        records.save(out / f"{name}.json", config, metrics, started, threads=1)


if __name__ == "__main__":
    typer.run(main)
