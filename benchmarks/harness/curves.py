"""A run's validation curve: read from its metrics.csv, and read off (best round's KL, NDCG@10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def validation_curve(run_dir: str | None) -> list[dict[str, float]]:
    """Per validation round of a run: epoch, fit seconds, val NDCG@10 and proposal KL.

    `time/fit_seconds` is the wall time since the fit started; `val/proposal_kl` is there
    when the run had a sampler.
    """
    import polars as pl

    path = Path(run_dir or "") / "metrics.csv"
    if run_dir is None or not path.is_file():
        return []
    # every row read for the types: a long epoch logs more than 100 train rows before its first
    # validation row, and a type guessed from those would read the metrics as text
    frame = pl.read_csv(path, infer_schema_length=None).filter(pl.col("val/ndcg@10").is_not_null())
    names = ("epoch", "time/fit_seconds", "val/ndcg@10", "val/proposal_kl")
    keep = [c for c in names if c in frame.columns]
    return frame.select(keep).to_dicts()


def best_epoch_kl(row: dict[str, Any]) -> float | None:
    """`val/proposal_kl` at the validation round with the best val NDCG@10 (None if absent).

    `row`: a run's metrics, its curve under `validation`.
    """
    curve = row.get("validation", [])
    if not curve:
        return None
    kl = max(curve, key=lambda v: v["val/ndcg@10"]).get("val/proposal_kl")
    return None if kl is None else float(kl)


def val_ndcg(row: dict[str, Any]) -> list[float]:
    """A run's val NDCG@10, one value a validation round (`row`: its metrics)."""
    values = [point.get("val/ndcg@10") for point in row.get("validation") or []]
    return [float(value) for value in values if value is not None]
