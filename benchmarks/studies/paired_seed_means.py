"""Paired interval of one setting against another, each averaged over its seeds.

Usage: python -m benchmarks.studies.paired_seed_means --reference A.npz --reference B.npz
    --other C.npz --other D.npz [--out FILE]

Each .npz is a run's per-user test NDCG@10 (`harness/paired.py`'s `save_per_user`, kept by
`studies/retrain_warm.py` as `<variant>_test_ndcg.npz`); every file must rank the same
test rows in the same order (runs on one split of one home; only the row counts can be
checked). A user's score on each side is the mean over that side's seeds, and the paired
bootstrap resamples users as `studies/paired_ndcg.py` does: the interval covers the test
rows' noise only, not the training's (two seeds a side do not measure it; the seed pairs,
reported too, show how far it moves).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from benchmarks import records
from benchmarks.harness.paired import load_per_user, paired_report


def _side(paths: list[Path]) -> tuple[dict[str, Any], np.ndarray]:
    """The seeds' labels and their per-user mean."""
    label = {"run": f"the mean of {len(paths)} seeds", "seeds": [str(path) for path in paths]}
    return label, np.mean([load_per_user(path)[1] for path in paths], axis=0)


def _same_rows(paths: list[Path]) -> None:
    counts = {str(path): len(load_per_user(path)[1]) for path in paths}
    if len(set(counts.values())) != 1:
        raise typer.BadParameter(f"scored on different rows: {counts}")


def main(
    reference: Annotated[list[Path], typer.Option(help="The reference's seeds (.npz).")],
    other: Annotated[list[Path], typer.Option(help="The compared setting's seeds (.npz).")],
    json_path: Annotated[
        Path | None, typer.Option("--out", help="Keep the report here (a record).")
    ] = None,
) -> None:
    """Print (and with --out keep) the seed means' interval and every seed pair's."""
    started = records.start()
    _same_rows([*reference, *other])
    report = paired_report(_side(reference), [_side(other)])
    report["seed_pairs"] = [
        {"reference": str(ref), "other": str(oth), **_pair(ref, oth)}
        for ref in reference
        for oth in other
    ]
    if json_path:
        config = {"reference": [str(p) for p in reference], "other": [str(p) for p in other]}
        records.save(json_path, config, report, started)
    typer.echo(json.dumps(report, indent=2))


def _pair(reference: Path, other: Path) -> dict[str, float]:
    result = paired_report(load_per_user(reference), [load_per_user(other)])["results"][0]
    return {k: result[k] for k in ("vs_reference", "ci95_low", "ci95_high")}


if __name__ == "__main__":
    typer.run(main)
