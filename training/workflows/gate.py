"""The retrain's quality gate: the candidate against the served model, then publish or keep out.

Both models are ranked on the same val rows (each user's latest events; of the users with new
events only, when the served model was refit on its own val events: `gate_rows`) with the
retrain's eval settings; a target the served model cannot know counts as its miss. The
candidate's ranks are its kept round's, taken before its refit trained on those rows (its run
folder's record, `training.workflows.gate_evidence.record_kept_round`, and its manifest's
`metrics.gate`); the bundle it publishes is the refit model, as `recsys train` publishes
(`train.refit_epochs`; 0: the kept round itself).

The decision is a paired comparison (`training.workflows.gate_evidence`): per row, candidate
minus served NDCG@10; their mean and its `retrain.confidence` t interval. The candidate is
refused only when the interval lies wholly below -`retrain.tolerance` (worse beyond the
tolerance with that confidence); a difference within the rows' noise publishes. It is then
published, with `--force` whatever the evidence, when the served model is still the one it was
gated against (a rollback during the retrain wins); otherwise it is kept out
(`bundle.keep_out`).

New items when a candidate is kept out: they stay in the vocabulary and their events in the
store, but no served model knows them, so no answer holds them (`/similar` and `/items` of one
answer 404; a history drops it, with a warning) until a later candidate is published. That
happens by itself at the next retrain, even with no new logs: the kept-out attempt's events are
still new to the served model, so it trains again on them. The refusal's reason names the
count of new items left unserved.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from data.workspace import Workspace
from model import bundle
from training.config import EvalConfig
from training.retrain_config import RetrainConfig
from training.workflows.gate_evidence import (
    PairedComparison,
    compare,
    metrics_of,
    ndcg_of,
    recorded_ranks,
)
from training.workflows.scoring import bundle_row_ranks

COUNTS = ("new_items", "new_users", "new_events", "rejected")  # from the attempt's journal

log = logging.getLogger(__name__)


@dataclass
class RetrainResult:
    """What a retrain did; `to_json()` is the `recsys retrain --json` payload.

    `gate`: the paired comparison (`PairedComparison.to_json`: decision, rows, mean difference,
    interval, confidence, tolerance), None when nothing was trained or nothing was served.
    """

    version: str
    previous_version: str | None
    published: bool
    reason: str
    metrics: dict[str, dict[str, float] | None]
    new_items: int
    new_users: int
    new_events: int
    rejected: int
    gate: dict[str, Any] | None = None

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
    ours, our_ranks = _candidate_scores(ws, version, rows, ruler)  # one ruler for both
    theirs, comparison = None, None
    if served is not None:
        their_ranks, their_log_p = bundle_row_ranks(served, rows, ruler)
        theirs = metrics_of(their_ranks, their_log_p, list(ruler.ks))
        comparison = compare(
            ndcg_of(our_ranks), ndcg_of(their_ranks), settings.confidence, settings.tolerance
        )
    published, reason = _decide(comparison, force, journal["new_items"])
    published, reason = _publish(ws, version, journal["previous_version"], published, reason)
    counts = {k: journal[k] for k in COUNTS}
    return RetrainResult(
        version, journal["previous_version"], published, reason,
        {"candidate": ours, "current": theirs}, **counts,
        gate=None if comparison is None else comparison.to_json(),
    )  # fmt: skip


def _publish(
    ws: Workspace, version: str, gated_against: str | None, publish: bool, reason: str
) -> tuple[bool, str]:
    """Publish `version` if the gate said so and the served model did not change; else keep out.

    (published?, why): a run this one resumed may have published it already.
    """
    now = bundle.current_version(ws.models_dir)
    if now == version:
        publish, reason = True, "published already (by the run this one resumed)"
    elif publish and now != gated_against:
        publish = False
        reason = (
            f"not published: the served model changed to {now} during the retrain (a rollback "
            f"or another publish); the candidate was gated against {gated_against}"
        )
    elif publish:
        bundle.publish(ws.models_dir, version)
    if not publish:
        bundle.keep_out(ws.models_dir, version, reason)
    return publish, reason


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


def _candidate_scores(
    ws: Workspace, version: str, rows: pl.DataFrame, gate: EvalConfig
) -> tuple[dict[str, float], Any]:
    """The candidate's kept round on `rows`: its metrics and each row's rank, as recorded.

    A candidate without that record (written by a retrain from before refits, never refit, or
    its run folder removed) is ranked here, as a bundle: a refit one then scores on rows it
    trained on.
    """
    candidate = bundle.ModelBundle.load(ws.models_dir / version)
    recorded = candidate.manifest.metrics.get("gate")
    ranks = recorded_ranks(ws.runs_dir / version, rows)
    if recorded is not None and ranks is not None:
        return dict(recorded), ranks
    if candidate.manifest.trained_on_val:
        log.warning("no record of %s's kept round on the gate's rows: ranking its bundle", version)
    ranked, log_p = bundle_row_ranks(candidate, rows, gate)
    return metrics_of(ranked, log_p, list(gate.ks)), ranked.numpy()


def _decide(comparison: PairedComparison | None, force: bool, new_items: int) -> tuple[bool, str]:
    """(publish?, why) from the paired comparison (None: nothing was served)."""
    if comparison is None:
        return True, "nothing was served"
    verdict = comparison.describe()
    if not comparison.refuses:
        return True, f"candidate is not worse beyond the tolerance: {verdict}"
    if force:
        return True, f"published by --force although worse: {verdict}"
    unserved = (
        f"; its {new_items} new items stay unserved until a retrain publishes" if new_items else ""
    )
    return False, f"candidate is worse, served model kept: {verdict}{unserved}"
