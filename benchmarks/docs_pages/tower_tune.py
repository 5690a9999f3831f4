"""The query-tower study's search over the chosen tower's own keys: one table per searched run."""

from __future__ import annotations

from typing import Any

from benchmarks import records
from benchmarks.docs_pages.tables import load
from benchmarks.docs_pages.towers import STUDY
from benchmarks.paths import RESULTS
from benchmarks.sweeps.tower_grid import DATASETS
from model.tower_settings import tower_settings

TUNED = RESULTS / "tower_tune"  # `benchmarks/studies/tower_tune.py`: the search over the keys


def tuned(page: str) -> str:
    """Markdown: per searched study run, the run, then each trial over its tower's own keys."""
    runs = sorted(path.name for path in TUNED.iterdir() if path.is_dir()) if TUNED.is_dir() else []
    blocks = [_search(run) for run in runs]
    return "\n".join(b for b in blocks if b) or "No trial of the search has finished yet.\n"


def _search(run: str) -> str:
    """One run's search: a table of the run and its trials, and what validation decides."""
    trials = [records.read(path) for path in sorted((TUNED / run).glob("*/trial-*.json"))]
    if not trials:
        return ""
    keys = list(tower_settings()[trials[0]["config"]["model"]["tower"]["name"]].search_space)
    lines = [
        f"| dataset | run | {' | '.join(keys)} | val NDCG@10 | epochs, minutes | load |",
        "|---|---|" + "---|" * len(keys) + "---|---|---|",
    ]
    best, own = {}, set()
    for dataset in DATASETS:
        rows = [_tune_row(t, keys) for t in trials if t["metrics"]["dataset"] == dataset]
        if rows:
            base = _tune_row(records.read(STUDY / dataset / f"{run}.json"), keys)
            lines += [row["line"] for row in (base, *rows)]
            best[dataset] = max((base, *rows), key=lambda row: row["val"] or 0.0)["keys"]
            own.add(base["keys"])
    leaders = set(best.values())
    if len(best) < len(DATASETS) or len(leaders) > 1:
        verdict = "no setting of the keys leads on both datasets: the study run's stay"
    else:
        lead = leaders.pop()
        kept = "the study run's own: they stay" if lead in own else "a change"
        shown = ", ".join(f"{key} {_value(value)}" for key, value in zip(keys, lead, strict=True))
        verdict = f"{shown} lead on both datasets ({kept})"
    return "\n".join(lines) + f"\n\nBy validation NDCG@10, {verdict}.\n"


def _tune_row(record: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """A study run's record or a trial's as a table row, its val NDCG@10 and its keys' values."""
    got, tower = record["metrics"], record["config"]["model"]["tower"]
    values = tuple(tower[key] for key in keys)
    if "trial" in got:
        name, val, minutes = f"trial {got['trial']}", got["val_ndcg@10"], got["minutes"]
    else:
        name, val, minutes = f"`{got['name']}`", got["val"]["ndcg@10"], got["train_seconds"] / 60
    shown = "-" if val is None else f"{val:.4f}"
    if got.get("state") == "pruned":  # stopped by the pruner: its score at that round
        shown += ", pruned"
    cells = " | ".join(_value(v) for v in values)
    line = (
        f"| {got['dataset']} | {name} | {cells} | {shown} | {got['epochs'] or '-'}, "
        f"{minutes:.0f} | {load(record['machine'])} |"
    )
    return {"line": line, "val": val, "keys": values}


def _value(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)
