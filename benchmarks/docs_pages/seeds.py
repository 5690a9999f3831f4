"""The chosen configuration like for like at each seed, and the one validation picks.

The query-tower study trains its chosen configuration at the sweeps' seed and at `SEEDS`; each
seed's test split is ranked once (`bench quality-test`). The like-for-like figure the product
default is held to is the seed with the best val NDCG@10 (`chosen`); the block shows every
seed and their mean, so the choice is in plain sight.
"""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, metrics, num, recorded, table
from benchmarks.sweeps.tower_grid import CHOSEN_SETTING, CHOSEN_TOWER, DATASETS, SEEDS, seed_spec

TESTED = "tower_study_test"  # `bench quality-test`: test ranked once per run
SWEEPS_SEED = 42  # `train.seed`'s default, which the study's other runs keep


def _runs(dataset: str) -> dict[int, str]:
    """Seed -> the chosen configuration's test record at that seed (those recorded)."""
    names = {SWEEPS_SEED: f"{CHOSEN_TOWER}-{CHOSEN_SETTING}"}
    names |= {seed: seed_spec(dataset, seed, CHOSEN_SETTING).name for seed in SEEDS}
    runs = {seed: f"{TESTED}/{dataset}/{name}" for seed, name in names.items()}
    return {seed: run for seed, run in runs.items() if recorded(run)}


def chosen(dataset: str) -> str:
    """The test record of the seed whose val NDCG@10 is the best."""
    runs = _runs(dataset).values()
    return max(runs, key=lambda run: metrics(run)["val_ndcg@10"])


def seeds(page: str) -> str:
    """Each seed's val and test figures, the seeds' mean, and the one validation chose."""
    rows = []
    for dataset in DATASETS:
        runs, pick = _runs(dataset), chosen(dataset)
        facts = {seed: metrics(run) for seed, run in runs.items()}
        for seed, run in runs.items():
            got = facts[seed]
            cells = [num(got["val_ndcg@10"]), *_test(got), str(got["test_rankings"])]
            rows.append([dataset, str(seed), *cells, "yes" if run == pick else "", cite(run, page)])
        mean = {k: sum(f["test"][k]["mean"] for f in facts.values()) / len(facts) for k in _KEYS}
        rows.append([dataset, "mean", "", num(mean["ndcg@10"]), num(mean["recall@10"]), "", "", ""])
    head = ["dataset", "seed", "val NDCG@10", "test NDCG@10", "test Recall@10",
            "times test was ranked", "chosen on validation", "record"]  # fmt: skip
    return table(head, rows)


_KEYS = ("ndcg@10", "recall@10")


def _test(got: dict) -> list[str]:
    return [num(got["test"][key]["mean"]) for key in _KEYS]
