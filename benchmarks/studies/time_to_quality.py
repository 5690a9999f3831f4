r"""Time to a good model: real `recsys train` runs, val NDCG@10 against wall-clock time.

Usage:
    python -m benchmarks.studies.time_to_quality --out benchmarks/results/time_to_quality \\
        full-2.5min="--dataset amazon-beauty --sampler full --set train.max_minutes=2.5" ...

Each NAME=ARGS runs `recsys train ARGS --json` in a fresh home, alone (a timing benchmark:
run nothing beside it), and writes the record `OUT/NAME.json`: the command, its wall seconds,
the machine's load before and after, the result JSON (test and val metrics by full ranking)
and the validation curve (epoch, `time/fit_seconds`, val NDCG@10, Recall@10). A NAME whose
record exists is skipped, so the sweep resumes. `OUT/time_to_quality.png` plots every
record's curve. A dataset name is looked up in `$RECSYS_DATASETS` (default: `shared/datasets`
beside the checkout).
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness.options import save_figure
from benchmarks.paths import REPO, RESULTS, datasets_root
from data.datasets import DATASETS_ENV_VAR


def _curve(run_dir: Path) -> list[dict[str, float]]:
    rows = csv.DictReader((run_dir / "metrics.csv").open())
    return [
        {"epoch": int(r["epoch"]) + 1, "fit_seconds": float(r["time/fit_seconds"]),
         "ndcg@10": float(r["val/ndcg@10"]), "recall@10": float(r["val/recall@10"])}
        for r in rows if r.get("val/ndcg@10") and r.get("time/fit_seconds")
    ]  # fmt: skip


def run_one(name: str, args: str, out: Path) -> dict[str, Any]:
    """Train once with `args` in a temporary home; the record written to `out/NAME.json`."""
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-ttq-") as home:
        cmd = [sys.executable, "-m", "app", "train", *shlex.split(args), "--json"]
        env = {**os.environ, "RECSYS_HOME": home, DATASETS_ENV_VAR: str(datasets_root())}
        done = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False
        )  # fmt: skip
        if done.returncode != 0:
            raise typer.BadParameter(f"{name}: recsys train failed: {done.stderr[-1500:]}")
        result = json.loads(done.stdout)
        metrics = {"name": name, "result": result, "validation": _curve(Path(result["run_dir"]))}
    config = {"command": f"recsys train {args}"}
    return records.save(out / f"{name}.json", config, metrics, started, device=result.get("device"))


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Val NDCG@10 against wall-clock seconds of the fit, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(13, 6))
    for rec in sorted((r["metrics"] for r in runs), key=lambda r: r["name"]):
        curve = rec["validation"]
        test = rec["result"]["metrics"]["test"]["ndcg@10"]
        ax.plot([0] + [c["fit_seconds"] / 60 for c in curve], [0] + [c["ndcg@10"] for c in curve],
                marker="o", label=f"{rec['name']} (test NDCG@10 {test:.4f})")  # fmt: skip
    ax.set(xlabel="wall-clock minutes of training", ylabel="val NDCG@10 (full ranking)",
           title="Time to quality: recsys train, 2-core machine (load: each JSON)")  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: many runs
    save_figure(fig, path)


def main(
    runs: Annotated[list[str], typer.Argument(help='NAME="recsys train arguments" pairs.')],
    out: Annotated[Path, typer.Option(help="Result folder.")] = RESULTS / "time_to_quality",
) -> None:
    """Run every NAME not yet in OUT, then plot all of OUT."""
    out.mkdir(parents=True, exist_ok=True)
    for pair in runs:
        name, _, args = pair.partition("=")
        if not args or (out / f"{name}.json").exists():
            continue
        rec = run_one(name, args, out)
        test = rec["metrics"]["result"]["metrics"]["test"]
        typer.echo(f"{name}: test ndcg@10 {test['ndcg@10']:.4f}, {rec['wall_seconds']} s wall")
    plot([records.read(p) for p in sorted(out.glob("*.json"))], out / "time_to_quality.png")


if __name__ == "__main__":
    typer.run(main)
