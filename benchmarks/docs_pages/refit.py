"""The refit study's blocks: the held-out NDCG@10 after each refit epoch, per dataset and arm.

`tower-refit`: how long (with the validation events, or without: the control);
`tower-refit-length`: the same for longer, with the validation events;
`tower-refit-decay`: with the lr held, or decayed over the refit as `plateau` decays it.
"""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, metrics, num, recorded, table
from benchmarks.sweeps.tower_grid import DATASETS

REFIT_STUDY = "refit_study_bsarec"  # `benchmarks/studies/refit_study.py` on the current defaults
ARMS = {"with_val": "with the validation events", "train_only": "training events alone"}
LENGTH_STUDY = "refit_length"  # the same study, `--epochs 24 --arms with_val`
DECAY_STUDY = "refit_decay"  # the same study, `--arms with_val --arms with_val_decay`
DECAY_ARMS = {"with_val": "lr held", "with_val_decay": "lr decayed over its epochs"}


def refit_curve(page: str) -> str:
    """Markdown: per dataset, the base fit's figure, each arm's after every epoch, and the best."""
    missing = "The refit study has not run on the current defaults yet.\n"
    return _lengths(REFIT_STUDY, ARMS, missing, page)


def refit_length(page: str) -> str:
    """Markdown: the refit with the validation events for longer, per dataset, and the best."""
    missing = "The longer refit has not been studied yet.\n"
    return _lengths(LENGTH_STUDY, {"with_val": ARMS["with_val"]}, missing, page)


def _lengths(study: str, arms: dict[str, str], missing: str, page: str) -> str:
    """`study`'s curves of `arms` and the refit length that leads; `missing` until it has run."""
    curves = _curves(study, arms)
    if curves is None:
        return missing
    best = {dataset: _best_epoch(by_arm["with_val"]) for dataset, by_arm in curves.items()}
    return _table(study, arms, "refit on", curves, page) + "\n" + _verdict(best) + "\n"


def refit_decay(page: str) -> str:
    """Markdown: the refit with its lr held or decayed, per dataset, and which ends higher."""
    curves = _curves(DECAY_STUDY, DECAY_ARMS)
    if curves is None:
        return "The refit's decay has not been studied yet.\n"
    table_ = _table(DECAY_STUDY, DECAY_ARMS, "the refit's lr", curves, page)
    leader = {
        dataset: max(DECAY_ARMS, key=lambda arm: arms[arm][-1]) for dataset, arms in curves.items()
    }
    if len(set(leader.values())) == 1:
        verdict = f"After the last epoch the refit with its {DECAY_ARMS[leader[DATASETS[0]]]} "
        verdict += "leads on both datasets."
    else:
        each = ", ".join(f"{d}: {DECAY_ARMS[arm]}" for d, arm in leader.items())
        verdict = f"After the last epoch the lead differs between the datasets ({each})."
    return table_ + "\n" + verdict + "\n"


def _curves(study: str, arms: dict[str, str]) -> dict[str, dict[str, list[float]]] | None:
    """Per dataset, each arm's held-out NDCG@10 after every epoch; None until both are run."""
    runs = {dataset: f"{study}/{dataset}" for dataset in DATASETS}
    if not all(recorded(run) for run in runs.values()):
        return None
    return {
        dataset: {arm: [row["ndcg@10"] for row in metrics(run)[arm]] for arm in arms}
        for dataset, run in runs.items()
    }


def _table(
    study: str, arms: dict[str, str], column: str, curves: dict[str, dict[str, list[float]]],
    page: str,
) -> str:  # fmt: skip
    """One row per dataset and arm: the base fit's held-out figure, then each epoch's."""
    rows = []
    for dataset, curve in curves.items():
        run = f"{study}/{dataset}"
        base = num(metrics(run)["base_test"]["ndcg@10"])
        rows += [[dataset, shown, base, *map(num, curve[arm]), cite(run, page)]
                 for arm, shown in arms.items()]  # fmt: skip
    epochs = len(next(iter(curves.values()))[next(iter(arms))])
    head = ["dataset", column, "base fit", *(str(e) for e in range(1, epochs + 1)), "record"]
    return table(head, rows)


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
