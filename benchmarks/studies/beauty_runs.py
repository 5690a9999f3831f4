"""Gather full-softmax tuning runs into one record and a plot of their validation curves.

Usage: python -m benchmarks.studies.beauty_runs --out FILE --plot FILE LABEL=HOME [LABEL=HOME ...]

Each HOME is a `recsys train --home HOME ...` workspace; its newest published bundle gives the
configuration, test/val metrics, epochs and training time (`models/<v>/manifest.json`) and its
run folder the per-epoch validation metrics (`runs/<v>/metrics.csv`). Nothing is recomputed.
"""

import csv
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness.options import save_figure
from model.bundle import Manifest, read_manifest

KEYS = ("recall@10", "ndcg@10", "mrr@10", "recall@20", "ndcg@20", "recall@100", "full_ce")
TUNED = {"model": ("dim", "dropout", "temperature", "max_len"), "train": ("lr", "batch_size")}


def _newest_manifest(home: Path) -> Manifest:
    models = home / "models"
    versions = sorted(models.glob("*/manifest.json")) if models.is_dir() else []
    if not versions:
        raise typer.BadParameter(f"{home}: no published model")
    return read_manifest(versions[-1].parent)


def _val_curve(home: Path, version: str) -> list[dict[str, float]]:
    rows = csv.DictReader((home / "runs" / version / "metrics.csv").open())
    return [
        {"epoch": int(r["epoch"]), "ndcg@10": float(r["val/ndcg@10"]),
         "recall@10": float(r["val/recall@10"])}
        for r in rows if r.get("val/ndcg@10")
    ]  # fmt: skip


def run_summary(label: str, home: Path) -> dict[str, Any]:
    """One run: its tuned settings, metrics, time and validation curve."""
    m = _newest_manifest(home)
    cfg = m.run_config()
    curve = _val_curve(home, m.version)
    best = max(curve, key=lambda row: row["ndcg@10"])
    return {
        "label": label,
        "version": m.version,
        "settings": {f"{s}.{k}": cfg[s][k] for s, keys in TUNED.items() for k in keys},
        "max_minutes": cfg["train"]["max_minutes"],
        "epochs": m.epochs,
        "train_seconds": m.train_seconds,
        "best_val_epoch": best["epoch"],
        "test": {k: m.metrics["test"][k] for k in KEYS},
        "val": {k: m.metrics["val"][k] for k in KEYS},
        "val_curve": curve,
    }


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Validation NDCG@10 and Recall@10 per epoch, one line per run, target lines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in runs:
        epochs = [row["epoch"] for row in run["val_curve"]]
        for ax, key in zip(axes, ("ndcg@10", "recall@10"), strict=True):
            ax.plot(epochs, [row[key] for row in run["val_curve"]], label=run["label"])
    for ax, key, target in zip(axes, ("NDCG@10", "Recall@10"), (0.050, 0.085), strict=True):
        ax.axhline(target, color="k", ls="--", lw=1, label=f"target {target} (on test)")
        ax.set(xlabel="epoch", ylabel=f"validation {key}", title=f"amazon-beauty, val {key}")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    save_figure(fig, path)


def main(
    runs: Annotated[list[str], typer.Argument(help="LABEL=HOME pairs.")],
    json_path: Annotated[Path, typer.Option("--out")],
    plot_path: Annotated[Path, typer.Option("--plot")],
    note: Annotated[str, typer.Option(help="How the runs were made (machine, threads).")] = "",
) -> None:
    """Write the record and the plot for the given runs."""
    started = records.start()
    summaries = []
    for pair in runs:
        label, sep, home = pair.rpartition("=")  # labels may hold "="
        if not sep:
            raise typer.BadParameter(f"expected LABEL=HOME, got {pair!r}")
        summaries.append(run_summary(label, Path(home)))
    config = {"dataset": "amazon-beauty", "sampler": "full", "note": note, "homes": runs}
    records.save(json_path, config, {"runs": summaries}, started)
    plot(summaries, plot_path)
    typer.echo(f"wrote {json_path} and {plot_path}")


if __name__ == "__main__":
    typer.run(main)
