"""The recipe study's report: val NDCG@10 of every recipe per dataset, and its curves in time.

`bench quality-report --grid recipe` writes `OUT/recipe.png` (one panel per dataset:
val NDCG@10 against wall-clock minutes of training, one line per recipe) and a markdown table,
best mean first, into the report block of `--doc`. The runs never ranked the test split, so
nothing here reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import options
from benchmarks.paths import DOCS
from benchmarks.sweeps.recipe_grid import DATASETS
from benchmarks.sweeps.run_records import read_row

PLOT = "recipe.png"
DEFAULT_DOC = DOCS / "recipe_study.md"  # links without a doc


def _runs(out: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Recipe name -> dataset -> its run's row."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for dataset in DATASETS:
        for path in sorted((out / dataset).glob("*.json")):
            run = read_row(path)
            runs.setdefault(run["name"], {})[dataset] = run
    return runs


def _run_cell(run: dict[str, Any] | None) -> str:
    """`epochs x s / epoch, what stopped it, load before / after` of one run (its row)."""
    if run is None:
        return "-"
    stops = {"time cap": "cap", "early stopping": "early", "max epochs": "max epochs"}
    stop = stops.get(run.get("stopped_by", ""), "")
    load = [run["machine"][f"load_{k}"] for k in ("before", "after")]
    shown = "/".join(f"{value:.1f}" for value in load if value is not None)
    cell = f"{run['epochs']} x {run['seconds_per_epoch']:.0f} s"
    return cell + (f", {stop}" if stop else "") + (f", load {shown}" if shown else "")


def _mean_of_known(values: list[float | None]) -> float:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else 0.0


def recipe_table(out: Path) -> str:
    """Markdown: val NDCG@10 of every recipe on each dataset and their mean, best first."""
    rows = []
    for name, by_dataset in _runs(out).items():
        vals = [by_dataset[d]["val"]["ndcg@10"] if d in by_dataset else None for d in DATASETS]
        runs = [_run_cell(by_dataset.get(d)) for d in DATASETS]
        rows.append((_mean_of_known(vals), name, vals, runs))
    # best mean first; while a dataset is missing, best mean of the datasets that have results
    rows.sort(key=lambda row: -row[0])
    head = "| recipe | " + " | ".join(f"val NDCG@10 {d}" for d in DATASETS) + " | mean | "
    head += " | ".join(f"epochs {d}" for d in DATASETS) + " |"
    lines = [head, "|" + "---|" * (2 * len(DATASETS) + 2)]
    for mean, name, vals, runs in rows:
        cells = [f"{v:.4f}" if v is not None else "-" for v in vals]
        shown = "-" if None in vals else f"{mean:.4f}"  # the mean of every dataset, or none
        lines.append(f"| {name} | {' | '.join(cells)} | {shown} | {' | '.join(runs)} |")
    return "\n".join(lines) + "\n"


def plot_recipes(out: Path, path: Path) -> None:
    """One panel per dataset: val NDCG@10 against wall-clock minutes, a line per recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _runs(out)
    names = sorted(runs)
    styles = {name: (f"C{i % 10}", "-" if i < 10 else "--") for i, name in enumerate(names)}
    fig, axes = plt.subplots(1, len(DATASETS), figsize=(7 * len(DATASETS), 5), squeeze=False)
    for ax, dataset in zip(axes[0], DATASETS, strict=True):
        for name, by_dataset in sorted(runs.items()):
            curve = (by_dataset.get(dataset) or {}).get("validation") or []
            points = [c for c in curve if c.get("time/fit_seconds") is not None]
            # float(): records written before `validation_curve` read every row for its types
            # hold these as text
            minutes = [float(c["time/fit_seconds"]) / 60 for c in points]
            ndcg = [float(c["val/ndcg@10"]) for c in points]
            color, line = styles[name]
            ax.plot(minutes, ndcg, line, marker=".", color=color, label=name)
        ax.set(xlabel="wall-clock minutes of training", ylabel="val NDCG@10", title=dataset)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("recipe study: validation against time (epochs and load: the table)")
    options.save_figure(fig, path)


def recipe_report(out: Path, resamples: int = 0, doc: Path | None = None) -> str:
    """Write the plot beside the results; the markdown table and the plot's link from `doc`.

    `resamples` is unused: a study on validation has no test intervals.
    """
    plot_recipes(out, out / PLOT)
    link = f"\n![recipe study]({options.doc_link(out / PLOT, doc or DEFAULT_DOC)})\n"
    return recipe_table(out) + link
