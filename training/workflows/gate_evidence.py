"""The retrain gate's evidence: both models' NDCG@10 on each gate row, paired, with an interval.

`record_kept_round` ranks a fit's kept round on the gate's rows and keeps each row's rank in
the run folder (`runs/<version>/gate_rows.parquet`) before a refit trains on those rows;
`recorded_ranks` reads them back for the gate. `compare` turns the two models' per-row NDCG@10
into the mean paired difference (candidate - served) and its confidence interval, and
`PairedComparison.refuses` is the gate's rule: refuse only when the whole interval lies below
-tolerance, that is when the candidate is worse by more than the tolerance with the stated
confidence. A difference within the noise of the rows publishes.

Why a paired t interval (and not a bootstrap): both models rank the same rows, so the
differences remove what makes one user hard for every model; the interval is the mean
difference +- t(confidence, rows - 1) times its standard error. It is exact for normal
differences and close for any other by the central limit theorem; it is deterministic (no seed,
no resampling), O(rows), and at few rows its t quantile makes it wider than a normal or a
percentile-bootstrap interval (the latter is known to undercover there), which errs toward
publishing, as a gate that refuses only on evidence should. With fewer than two rows nothing
is known about the noise: the interval is unbounded and the candidate publishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl
import torch
from torch import Tensor

from data.store import atomic_write
from training.config import RecsysConfig
from training.evaluation.metrics import all_missed, ndcg_per_user, ranking_metrics
from training.loop.lit_module import RetrievalModule
from training.workflows.scoring import rows_ranks

GATE_K = 10
GATE_METRIC = f"ndcg@{GATE_K}"
GATE_ROWS_FILE = "gate_rows.parquet"  # in the candidate's run folder
METHOD = "paired t interval"


@dataclass(frozen=True)
class PairedComparison:
    """Candidate minus served NDCG@10 over the gate's rows, and the interval around its mean."""

    rows: int
    candidate: float  # mean NDCG@10 of each model over the rows
    served: float
    mean_difference: float
    interval: tuple[float, float]  # (-inf, inf) with fewer than 2 rows
    confidence: float
    tolerance: float

    @property
    def refuses(self) -> bool:
        """True when the candidate is worse by more than the tolerance at this confidence."""
        return self.interval[1] < -self.tolerance

    def describe(self) -> str:
        """One line: the difference, its interval, the rows, both means and the tolerance."""
        low, high = self.interval
        bounds = f"[{low:+.4f}, {high:+.4f}]" if math.isfinite(high) else "unbounded"
        return (
            f"val {GATE_METRIC} candidate - served {self.mean_difference:+.4f}, "
            f"{self.confidence:.0%} interval {bounds} on {self.rows} rows (candidate "
            f"{self.candidate:.4f}, served {self.served:.4f}; tolerance {self.tolerance:g})"
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON of `recsys retrain --json`'s `gate` (an unbounded end is null)."""
        low, high = (v if math.isfinite(v) else None for v in self.interval)
        return {
            "decision": "refuse" if self.refuses else "publish",
            "metric": GATE_METRIC, "method": METHOD, "rows": self.rows,
            "candidate": self.candidate, "served": self.served,
            "mean_difference": self.mean_difference, "interval": [low, high],
            "confidence": self.confidence, "tolerance": self.tolerance,
        }  # fmt: skip


def compare(
    candidate: np.ndarray, served: np.ndarray, confidence: float, tolerance: float
) -> PairedComparison:
    """The paired comparison of two models' per-row scores on the same rows (module docstring)."""
    ours, theirs = (np.asarray(a, dtype=np.float64) for a in (candidate, served))
    if ours.shape != theirs.shape:
        raise ValueError(f"paired scores differ in shape: {ours.shape} vs {theirs.shape}")
    rows = int(ours.size)
    diff = ours - theirs
    mean = float(diff.mean()) if rows else 0.0
    if rows < 2:
        interval = (-math.inf, math.inf)
    else:
        half = t_quantile(confidence, rows - 1) * float(diff.std(ddof=1)) / math.sqrt(rows)
        interval = (mean - half, mean + half)
    return PairedComparison(
        rows, float(ours.mean()) if rows else 0.0, float(theirs.mean()) if rows else 0.0,
        mean, interval, confidence, tolerance,
    )  # fmt: skip


def t_quantile(confidence: float, df: int) -> float:
    """The t such that P(|T| <= t) = `confidence` for Student's t with `df` degrees of freedom.

    Up to 30 degrees of freedom by bisection on the exact distribution (Abramowitz & Stegun
    26.7.3-4, in the angle theta = atan(t / sqrt(df))); above, by the Cornish-Fisher series of
    26.7.5 (relative error below 1e-6 there).
    """
    if not 0.0 < confidence < 1.0 or df < 1:
        raise ValueError(f"confidence in (0, 1) and df >= 1 needed, got {confidence}, {df}")
    if df > 30:
        z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
        terms = (
            (z**3 + z) / 4,
            (5 * z**5 + 16 * z**3 + 3 * z) / 96,
            (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
            (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
        )
        return z + sum(g / df ** (i + 1) for i, g in enumerate(terms))
    low, high = 0.0, math.pi / 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _two_sided(mid, df) < confidence else (low, mid)
    return math.sqrt(df) * math.tan((low + high) / 2)


def _two_sided(theta: float, df: int) -> float:
    """P(|T| <= sqrt(df) tan(theta)) for Student's t with integer `df` (A & S 26.7.3-4)."""
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    term, total = (math.cos(theta), 0.0) if df % 2 else (1.0, 0.0)
    for j in range(1 if df % 2 else 0, df - 1, 2):  # the powers of cos below df - 1
        total += term
        term *= cos2 * (j + 1) / (j + 2)
    if df % 2:
        return 2 / math.pi * (theta + sin * total) if df > 1 else 2 * theta / math.pi
    return sin * total


def ndcg_of(ranks: Tensor | np.ndarray) -> np.ndarray:
    """Per-row NDCG@10 from 0-based ranks (a miss, `UNRANKED` included: 0)."""
    return ndcg_per_user(torch.as_tensor(np.asarray(ranks)), GATE_K).numpy()


def metrics_of(ranks: Tensor, log_p: Tensor, ks: list[int]) -> dict[str, float]:
    """Recall/NDCG/MRR@K over every row (a miss scores 0); full_ce over the rows in `log_p`."""
    if not ranks.numel():
        return all_missed(ks)
    metrics = ranking_metrics(ranks, log_p if log_p.numel() else torch.zeros(1), ks)
    if not log_p.numel():  # no target the model knows: no cross-entropy
        metrics.pop("full_ce")
    return {k: float(v) for k, v in metrics.items()}


def record_kept_round(
    module: RetrievalModule, rows: pl.DataFrame, num_items: int, cfg: RecsysConfig, run_dir: Path
) -> dict[str, float]:
    """Rank the kept round on the gate's `rows`; keep each row's rank; return the metrics."""
    if not rows.height:
        return all_missed(cfg.eval.ks)
    ranks, log_p = rows_ranks(module, rows, num_items, cfg)
    frame = pl.DataFrame({"user_idx": rows["user_idx"], "rank": ranks.numpy()})
    atomic_write(run_dir / GATE_ROWS_FILE, frame.write_parquet)
    return metrics_of(ranks, log_p, cfg.eval.ks)


def recorded_ranks(run_dir: Path, rows: pl.DataFrame) -> np.ndarray | None:
    """The kept round's rank of each of `rows`, as recorded; None without a record of them."""
    try:
        frame = pl.read_parquet(run_dir / GATE_ROWS_FILE)
    except (OSError, pl.exceptions.PolarsError):
        return None
    if frame["user_idx"].to_list() != rows["user_idx"].to_list():
        return None  # recorded on other rows: not the ones gated on
    return frame["rank"].to_numpy()
