"""Early-stopping rules replayed on every recorded validation curve (no training).

Usage:
    python -m benchmarks.studies.stopping_rules \
        --out benchmarks/results/stopping_rules/stopping_rules.json

Every committed run of the sampler comparison, the recipe study and the final grid (the
final grid's earlier versions too, from git history, written before the record schema)
recorded its val NDCG@10 after each round. A stopping rule is replayed on each curve: it
stops at some round s, and the run keeps its best round up to s (the checkpoint `recsys
train` restores). A curve that ended at its time cap or its epoch limit says what every rule
gives; a curve that ended by its own early stopping says it only for a rule that stops no
later than it did (the rest are censored: counted, not scored). Scored on validation only,
on both datasets.

Rules: `patience-P` (Lightning's: stop when P rounds set no new best, the default P = 10);
`mean-W-P` (the same on the mean of the last W rounds, `train.patience_window`: one noisy
round cannot restart or end the count alone; `training/loop/stopping.py`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness.curves import val_ndcg
from benchmarks.paths import REPO, RESULTS
from training.loop.stopping import stop_round

SOURCES = ("recipe_final", "recipe_study", "sampler_sweep")
RULES = {
    **{f"patience-{p}": (1, p) for p in (5, 10, 15, 20, 30)},
    **{f"mean-{w}-{p}": (w, p) for w in (3, 5) for p in (5, 10, 15)},
}


def _record(text: str, origin: str) -> dict[str, Any] | None:
    """A run's curve from a record, or from a file of before the schema (git history)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not records.problems(doc):
        doc = {**doc["metrics"], "precision": doc["machine"]["precision"] or "fp32"}
    if not isinstance(doc, dict) or "validation" not in doc or "stopped_by" not in doc:
        return None
    return {
        "origin": origin, "dataset": doc.get("dataset"), "name": doc.get("name"),
        "precision": doc.get("precision", "fp32"), "stopped_by": doc["stopped_by"],
        "curve": val_ndcg(doc),
    }  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def committed_curves() -> list[dict[str, Any]]:
    """Every run record in the working tree, and the final grid's earlier versions."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for source in SOURCES:
        for path in sorted((RESULTS / source).rglob("*.json")):
            rec = _record(path.read_text(), str(path.relative_to(REPO)))
            if rec:
                found[(rec["dataset"], rec["name"], tuple(rec["curve"]))] = rec
    final = "benchmarks/results/recipe_final"
    for commit in _git("log", "--format=%H", "--", final).split():
        for name in _git("ls-tree", "-r", "--name-only", commit, "--", final).split():
            if name.endswith(".json"):
                rec = _record(_git("show", f"{commit}:{name}"), f"{commit[:7]}:{name}")
                if rec:
                    found.setdefault((rec["dataset"], rec["name"], tuple(rec["curve"])), rec)
    return [rec for rec in found.values() if len(rec["curve"]) >= 2]


def replay(rec: dict[str, Any], window: int, patience: int) -> dict[str, Any] | None:
    """The rule on one curve: rounds, val kept, loss against the curve's best; None: censored."""
    curve = rec["curve"]
    stop = stop_round(curve, patience, window)
    if stop is None and rec["stopped_by"] == "early stopping":
        return None  # the rule would have trained past what was recorded
    rounds = stop or len(curve)
    kept = max(curve[:rounds])
    return {"rounds": rounds, "of": len(curve), "kept": kept, "loss": 1 - kept / max(curve)}


def summarise(curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Per rule: scored and censored curves, mean and worst loss, share of rounds used."""
    table = {}
    for rule, (window, patience) in RULES.items():
        scored = [r for r in (replay(c, window, patience) for c in curves) if r]
        table[rule] = {
            "scored": len(scored), "censored": len(curves) - len(scored),
            "mean_loss_pct": round(100 * sum(r["loss"] for r in scored) / len(scored), 3),
            "worst_loss_pct": round(100 * max(r["loss"] for r in scored), 2),
            "losses_over_1pct": sum(r["loss"] > 0.01 for r in scored),
            "rounds_share": round(sum(r["rounds"] / r["of"] for r in scored) / len(scored), 3),
        }  # fmt: skip
    return table


def main(json_out: Annotated[Path, typer.Option("--out")]) -> None:
    """Replay every rule on every committed curve; write the summary and the per-curve stops."""
    started = records.start()
    curves = committed_curves()
    # Only curves that ran to their budget score every rule: the fair comparison.
    uncensored = [c for c in curves if c["stopped_by"] != "early stopping"]
    per_curve = [
        {**{k: c[k] for k in ("origin", "dataset", "name", "precision", "stopped_by")},
         "rounds": len(c["curve"]), "best": round(max(c["curve"]), 5),
         "stops": {rule: replay(c, *wp) for rule, wp in RULES.items()}}
        for c in curves
    ]  # fmt: skip
    out: dict[str, Any] = {
        "curves": len(curves), "ran_to_budget": len(uncensored),
        "all_curves": summarise(curves), "budget_curves": summarise(uncensored),
        "per_curve": per_curve,
    }  # fmt: skip
    records.save(json_out, {"sources": SOURCES, "rules": RULES}, out, started)
    for label in ("all_curves", "budget_curves"):
        typer.echo(f"{label}:")
        for rule, row in out[label].items():
            typer.echo(f"  {rule:14s} {row}")


if __name__ == "__main__":
    typer.run(main)
