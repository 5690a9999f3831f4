"""Quality against bias: test NDCG@10 of trained runs against their proposal's KL to the model.

Usage: python -m benchmarks.studies.quality_vs_kl --results FILE [--results FILE ...]
    --negatives M --out OUT --plot OUT.png

Each FILE is the record of a `bench quality` run. Every run with m = M negatives becomes one
point: x = `val/proposal_kl` at its best validation epoch (KL(model softmax || proposal), the
bias of the papers), y = its test NDCG@10; the first full-softmax run of the files draws the
reference line and the line 3% below it. A run is labelled by its sampler and the `sampler.*`
and `train.seed` overrides of its config, so the same sampler under several settings (rff at
several D and nu, exact at several nu, another seed) stays apart.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness.curves import best_epoch_kl
from benchmarks.harness.options import save_figure

_NAMING_KEYS = ("sampler.", "train.seed=")
_PROTOCOL_KEYS = ("sampler.per_query",)  # set in every file, so it names no run


def label(sampler: str, overrides: list[str]) -> str:
    """`rff` + its file's naming overrides, e.g. `rff features=1024 nu=5 seed=43`."""
    keys = [o for o in overrides if o.startswith(_NAMING_KEYS) and not o.startswith(_PROTOCOL_KEYS)]
    return " ".join([sampler, *(k.split(".", 1)[1] for k in keys)])


def points(runs: list[dict[str, Any]], negatives: int) -> dict[str, Any]:
    """The reference (full softmax) row and one point per run (record) with m = `negatives`."""
    reference, rows = None, []
    for run in runs:
        row = run["metrics"]
        if row["sampler"] == "full":
            reference = reference or {"ndcg@10": row["ndcg@10"], "val_ndcg@10": row["val_ndcg@10"]}
        elif row["num_negatives"] == negatives:
            rows.append({
                "label": label(row["sampler"], (run["config"] or {}).get("overrides", [])),
                "ndcg@10": row["ndcg@10"],
                "val_ndcg@10": row["val_ndcg@10"],
                "full_ce": row["full_ce"],
                "proposal_kl": best_epoch_kl(row),
                "epochs": row["epochs"],
            })  # fmt: skip
    if reference is None:
        raise typer.BadParameter("no full-softmax run in the result files")
    for row in rows:
        row["vs_full"] = row["ndcg@10"] / reference["ndcg@10"] - 1
    rows.sort(key=lambda r: r["proposal_kl"] if r["proposal_kl"] is not None else float("inf"))
    return {"negatives": negatives, "reference": reference, "results": rows}


def plot(summary: dict[str, Any], path: Path) -> None:
    """Scatter of test NDCG@10 against best-epoch KL, with the full softmax and full - 3%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    full = summary["reference"]["ndcg@10"]
    ax.axhline(full, color="black", linestyle="--", label="full softmax")
    ax.axhline(0.97 * full, color="grey", linestyle=":", label="full - 3%")
    for row in summary["results"]:
        if row["proposal_kl"] is None:
            continue
        ax.scatter(row["proposal_kl"], row["ndcg@10"], label=row["label"])
    ax.set_xlabel("KL(model softmax || proposal) at the best validation epoch, nats")
    ax.set_ylabel("test NDCG@10")
    ax.set_title(f"per-query negatives, m = {summary['negatives']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(
    results: Annotated[list[Path], typer.Option(help="A bench quality record (repeatable).")],
    negatives: Annotated[int, typer.Option(help="The m of the runs compared.")],
    json_path: Annotated[Path, typer.Option("--out", help="Write the summary here.")],
    plot_path: Annotated[Path, typer.Option("--plot", help="Write the PNG here.")],
) -> None:
    """Summarise the runs as a record and plot them."""
    started = records.start()
    summary = points([records.read(p) for p in results], negatives)
    config = {"sources": [str(p) for p in results], "negatives": negatives}
    records.save(json_path, config, summary, started)
    plot(summary, plot_path)


if __name__ == "__main__":
    typer.run(main)
