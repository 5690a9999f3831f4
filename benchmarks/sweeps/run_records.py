"""The records of a sweep's runs, `OUT/<dataset>/<run>.json`, as the grids and reports read them.

A run's row is its record's metrics with its config and machine beside (`row["config"]`,
`row["machine"]`); its per-user test NDCG@10 is the `.ndcg.npz` beside the record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import records


def row(record: dict[str, Any]) -> dict[str, Any]:
    """A run's record as one row: its metrics, with `config` and `machine`."""
    return {**record["metrics"], "config": record["config"], "machine": record["machine"]}


def read_row(path: Path) -> dict[str, Any]:
    """The row of the record at `path` (RecsysInputError if it is not a record)."""
    return row(records.read(path))


def val_ndcg10(path: Path) -> float:
    """The val NDCG@10 a run's record holds."""
    return float(records.read(path)["metrics"]["val"]["ndcg@10"])


def load_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every run's row under `out`, by dataset folder, in file-name order.

    Other records beside them (a benchmark's own folder of results) are not runs: skipped.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out.glob("*/*.json")):
        run = read_row(path)
        if run.get("dataset") == path.parent.name:
            found.setdefault(path.parent.name, []).append(run)
    return found


def load_ndcg(out: Path, run: dict[str, Any]) -> np.ndarray:
    """A run's per-user test NDCG@10 from its `.ndcg.npz` beside the record (`run`: its row)."""
    with np.load(out / run["dataset"] / run["per_user_ndcg"]) as data:
        return np.asarray(data["ndcg"], dtype=np.float64)
