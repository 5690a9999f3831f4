"""The retrain's quality gate: the candidate against the served model, then publish or keep out.

Both models are ranked on the same val rows (each user's latest events; of the users with new
events only, when the served model was refit on its own val events: `gate_rows`) with the
retrain's eval settings; a target the served model cannot know counts as its miss. The
candidate's score is its kept round's, ranked before its refit trained on those rows (its
manifest's `metrics.gate`, `training.workflows.pipeline.train_on`); the bundle it publishes is
the refit model, as `recsys train` publishes (`train.refit_epochs`; 0: the kept round itself). The
candidate is published when its val NDCG@10 is not worse than the served model's by more than
`retrain.tolerance` (or with `--force`) and the served model is still the one it was gated
against (a rollback during the retrain wins); otherwise it is kept out (`bundle.keep_out`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from data.workspace import Workspace
from model import bundle
from training.config import EvalConfig, RetrainConfig
from training.workflows.scoring import bundle_metrics

GATE_METRIC = "ndcg@10"
COUNTS = ("new_items", "new_users", "new_events", "rejected")  # from the attempt's journal


@dataclass
class RetrainResult:
    """What a retrain did; `to_json()` is the `recsys retrain --json` payload."""

    version: str
    previous_version: str | None
    published: bool
    reason: str
    metrics: dict[str, dict[str, float] | None]
    new_items: int
    new_users: int
    new_events: int
    rejected: int

    def to_json(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict."""
        return asdict(self)


def nothing_new(journal: dict[str, Any]) -> RetrainResult:
    """The result of a retrain whose logs hold no event the served model has not seen."""
    served = journal["previous_version"]
    reason = (
        f"nothing retrained: no stored event is new to the served model {served} (--full "
        "trains from scratch anyway; --force warm-starts anyway and publishes without the gate)"
    )
    counts = {k: journal[k] for k in COUNTS}
    return RetrainResult(
        served, served, False, reason, {"candidate": None, "current": None}, **counts
    )


def gate_and_publish(
    ws: Workspace,
    settings: RetrainConfig,
    ruler: EvalConfig,
    rows: pl.DataFrame,
    journal: dict[str, Any],
    served: bundle.ModelBundle | None,
    force: bool,
) -> RetrainResult:
    """Compare the candidate with the served model on the same val `rows`; publish or keep."""
    version = journal["version"]
    candidate = bundle.ModelBundle.load(ws.models_dir / version)
    ours = _candidate_metrics(candidate, rows, ruler)  # one ruler for both
    theirs = _val_metrics(served, rows, ruler) if served is not None else None
    published, reason = _decide(ours, theirs, settings.tolerance, force)
    now = bundle.current_version(ws.models_dir)
    if now == version:
        published, reason = True, "published already (by the run this one resumed)"
    elif published and now != journal["previous_version"]:
        published = False
        reason = (
            f"not published: the served model changed to {now} during the retrain (a rollback "
            f"or another publish); the candidate was gated against {journal['previous_version']}"
        )
    elif published:
        bundle.publish(ws.models_dir, version)
    if not published:
        bundle.keep_out(ws.models_dir, version, reason)
    counts = {k: journal[k] for k in COUNTS}
    return RetrainResult(
        version, journal["previous_version"], published, reason,
        {"candidate": ours, "current": theirs}, **counts,
    )  # fmt: skip


def gate_rows(
    val: pl.DataFrame, served: bundle.ModelBundle | None, fresh: pl.Series
) -> pl.DataFrame:
    """The val rows the served model never trained on: the gate's rows.

    A served model refit on its validation events (`train.refit_epochs`) trained on the val
    row of every user with no event new to it (that row is unchanged): those users' rows
    are left out, unless no row would be left. `fresh`: the user_idx of the users with
    events the served model did not see.
    """
    if served is None or not served.manifest.trained_on_val:
        return val
    unseen = val.filter(pl.col("user_idx").is_in(fresh.implode()))
    return unseen if unseen.height else val


def _candidate_metrics(
    candidate: bundle.ModelBundle, rows: pl.DataFrame, gate: EvalConfig
) -> dict[str, float]:
    """The candidate's kept round on `rows`: as ranked before its refit (`metrics.gate`).

    A candidate written without that record (by a retrain from before refits, never refit) is
    ranked here.
    """
    recorded = candidate.manifest.metrics.get("gate")
    return dict(recorded) if recorded is not None else _val_metrics(candidate, rows, gate)


def _val_metrics(
    model: bundle.ModelBundle, rows: pl.DataFrame, gate: EvalConfig
) -> dict[str, float]:
    """Val metrics over every val row; rows whose target the model does not know are misses.

    Recall, NDCG and MRR at K score a miss 0, so the metrics on the known rows scale by the
    known share. The full cross-entropy has no value for an unknown target: it covers the
    known rows only.
    """
    metrics, known = bundle_metrics(model, rows, gate)
    share = known / max(rows.height, 1)
    return {k: (v if k == "full_ce" else v * share) for k, v in metrics.items()}


def _decide(
    ours: dict[str, float], theirs: dict[str, float] | None, tolerance: float, force: bool
) -> tuple[bool, str]:
    """(publish?, why) from the candidate's and the served model's val metrics."""
    if theirs is None:
        return True, "nothing was served"
    new, old = ours[GATE_METRIC], theirs[GATE_METRIC]
    verdict = f"val {GATE_METRIC} {new:.4f} vs served {old:.4f} (tolerance {tolerance:g})"
    if new >= old - tolerance:
        return True, f"candidate is not worse: {verdict}"
    if force:
        return True, f"published by --force although worse: {verdict}"
    return False, f"candidate is worse, served model kept: {verdict}"
