"""The refit study's block: the held-out NDCG@10 after each refit epoch, per dataset and arm."""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, metrics, num, recorded, table
from benchmarks.sweeps.tower_grid import DATASETS

REFIT_STUDY = "refit_study_bsarec"  # `benchmarks/studies/refit_study.py` on the current defaults
ARMS = {"with_val": "with the validation events", "train_only": "training events alone"}


def refit_curve(page: str) -> str:
    """Markdown: per dataset, the base fit's figure, each arm's after every epoch, and the best."""
    runs = [f"{REFIT_STUDY}/{dataset}" for dataset in DATASETS]
    if not all(recorded(run) for run in runs):
        return "The refit study has not run on the current defaults yet.\n"
    epochs = len(metrics(runs[0])["with_val"])
    rows, best = [], {}
    for run, dataset in zip(runs, DATASETS, strict=True):
        got = metrics(run)
        curves = {arm: [row["ndcg@10"] for row in got[arm]] for arm in ARMS}
        for arm, shown in ARMS.items():
            rows.append([dataset, shown, num(got["base_test"]["ndcg@10"]),
                         *map(num, curves[arm]), cite(run, page)])  # fmt: skip
        best[dataset] = _best_epoch(curves["with_val"])
    head = ["dataset", "refit on", "base fit", *(str(e) for e in range(1, epochs + 1)), "record"]
    return table(head, rows) + "\n" + _verdict(best) + "\n"


def _best_epoch(curve: list[float]) -> int:
    """The refit epochs (1-based) after which the held-out NDCG@10 `curve` was best."""
    return 1 + max(range(len(curve)), key=curve.__getitem__)


def _verdict(best: dict[str, int]) -> str:
    """Which refit length leads on both datasets, or each dataset's best."""
    lengths = set(best.values())
    if len(lengths) == 1:
        return f"Refitting {lengths.pop()} epochs leads on both datasets."
    each = ", ".join(f"{dataset}: {epochs}" for dataset, epochs in best.items())
    return f"The best refit length differs between the datasets ({each})."
