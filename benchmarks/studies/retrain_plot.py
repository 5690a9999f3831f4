"""Plot a warm retrain against the full retrain, one panel per result folder.

Usage: python -m benchmarks.studies.retrain_plot DIR [DIR ...] --out PNG [--warm NAME]
    [--full NAME]

Each DIR is a `studies/retrain_warm.py` result folder. Its panel draws the two runs'
validation rounds (the record `DIR/curves.json`: val NDCG@10 of the gate's rows by fit
seconds) and, at each run's wall seconds (fit, refit, export and gate), a marker at its test
NDCG@10 (the record `DIR/<name>.json`), so the time ratio and the quality gap are read off one
picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records


def _panel(ax: Any, folder: Path, names: dict[str, str]) -> None:
    curves = records.read(folder / "curves.json")["metrics"]
    for (label, name), colour in zip(names.items(), ("tab:orange", "tab:blue"), strict=True):
        record = records.read(folder / f"{name}.json")["metrics"]
        rounds = curves[name]
        test = record["test"]["metrics"]["ndcg@10"]
        ax.plot(
            [r["fit_seconds"] for r in rounds],
            [r["val_ndcg@10"] for r in rounds],
            color=colour,
            marker=".",
            label=f"{label} ({name}): val NDCG@10 by round",
        )
        ax.plot(
            [record["wall_seconds"]],
            [test],
            color=colour,
            marker="*",
            markersize=14,
            linestyle="none",
            label=f"{label}: test NDCG@10 {test:.4f} after {record['wall_seconds']:.0f} s",
        )
    ax.set(
        xlabel="seconds",
        ylabel="NDCG@10",
        title=f"{folder.name}: {' against '.join(names.values())}",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def main(
    folders: Annotated[list[Path], typer.Argument(help="retrain_warm.py result folders.")],
    out: Annotated[Path, typer.Option(help="The PNG to write.")],
    warm: Annotated[str, typer.Option(help="The warm variant.")] = "warm_refit_p1_e14",
    full: Annotated[str, typer.Option(help="The full retrain.")] = "full_refit",
) -> None:
    """Write one panel per folder into `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(folders), figsize=(7 * len(folders), 5), squeeze=False)
    for ax, folder in zip(axes[0], folders, strict=True):
        _panel(ax, folder, {"warm": warm, "full": full})
    fig.suptitle("recsys retrain: warm against --full, on the same new logs")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    typer.echo(f"wrote {out}")


if __name__ == "__main__":
    typer.run(main)
