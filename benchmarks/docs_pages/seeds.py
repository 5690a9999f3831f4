"""A configuration like for like at each seed, and the seed validation picks.

The query-tower study trains its chosen configuration, and the ones chosen before it
(`EARLIER_CHOICES`), at the sweeps' seed and at `SEEDS`; each seed's test split is ranked once
(`bench quality-test`). The like-for-like figure the product default is held to is the chosen
configuration's seed with the best val NDCG@10 (`chosen`); the block shows every seed of both
and their means, so the choice is in plain sight.
"""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, metrics, num, recorded, table
from benchmarks.sweeps.tower_grid import (
    CHOSEN_SETTING,
    CHOSEN_TOWER,
    DATASETS,
    EARLIER_CHOICES,
    SEEDS,
    seed_spec,
)

TESTED = "tower_study_test"  # `bench quality-test`: test ranked once per run
SWEEPS_SEED = 42  # `train.seed`'s default, which the study's other runs keep


def _runs(dataset: str, setting: str) -> dict[int, str]:
    """Seed -> `setting`'s test record at that seed (those recorded)."""
    names = {SWEEPS_SEED: f"{CHOSEN_TOWER}-{setting}"}
    names |= {seed: seed_spec(dataset, seed, setting).name for seed in SEEDS}
    runs = {seed: f"{TESTED}/{dataset}/{name}" for seed, name in names.items()}
    return {seed: run for seed, run in runs.items() if recorded(run)}


def chosen(dataset: str) -> str:
    """The chosen configuration's test record at the seed whose val NDCG@10 is the best."""
    runs = _runs(dataset, CHOSEN_SETTING).values()
    return max(runs, key=lambda run: metrics(run)["val_ndcg@10"])


def seeds(page: str) -> str:
    """Each seed's val and test figures and their mean, per setting; the seed validation chose."""
    rows = []
    for dataset in DATASETS:
        pick = chosen(dataset)
        for setting in (*EARLIER_CHOICES, CHOSEN_SETTING):
            rows += _setting_rows(dataset, setting, pick, page)
    head = ["dataset", "setting", "seed", "val NDCG@10", "test NDCG@10", "test Recall@10",
            "times test was ranked", "chosen on validation", "record"]  # fmt: skip
    return table(head, rows)


def _setting_rows(dataset: str, setting: str, pick: str, page: str) -> list[list[str]]:
    """One row per seed of `setting` with a ranked test split (`pick` marked), then their mean."""
    runs = _runs(dataset, setting)
    facts = {seed: metrics(run) for seed, run in runs.items()}
    rows = []
    for seed, run in runs.items():
        got = facts[seed]
        cells = [num(got["val_ndcg@10"]), *_test(got), str(got["test_rankings"])]
        mark = "yes" if run == pick else ""
        rows.append([dataset, f"`{setting}`", str(seed), *cells, mark, cite(run, page)])
    mean = {k: sum(f["test"][k]["mean"] for f in facts.values()) / len(facts) for k in _KEYS}
    means = [num(mean[key]) for key in _KEYS]
    return [*rows, [dataset, f"`{setting}`", "mean", "", *means, "", "", ""]]


_KEYS = ("ndcg@10", "recall@10")


def _test(got: dict) -> list[str]:
    return [num(got["test"][key]["mean"]) for key in _KEYS]
