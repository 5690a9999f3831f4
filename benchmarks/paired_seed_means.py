"""Paired interval of one setting against another, each averaged over its seeds.

Usage: python benchmarks/paired_seed_means.py --reference A.npz --reference B.npz
    --other C.npz --other D.npz [--json FILE]

Each .npz is a run's per-user test NDCG@10 (`app/bench/paired.py`'s `save_per_user`, kept by
`benchmarks/retrain_warm.py` as `<variant>_test_ndcg.npz`); every file must rank the same
test rows in the same order (runs on one split of one home). A user's score on each side is
the mean over that side's seeds, so the interval covers the test rows' noise with the
seed-to-seed noise of each side averaged down, and the paired bootstrap resamples users as
`benchmarks/paired_ndcg.py` does. Each seed pair across the sides is reported too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from app.bench.paired import load_per_user, paired_report


def _side(paths: list[Path]) -> tuple[dict[str, Any], np.ndarray]:
    """The seeds' labels and their per-user mean."""
    loaded = [load_per_user(path) for path in paths]
    if len({len(ndcg) for _, ndcg in loaded}) != 1:
        raise typer.BadParameter(f"{[str(p) for p in paths]}: scored on different rows")
    label = {"run": f"the mean of {len(paths)} seeds", "seeds": [str(path) for path in paths]}
    return label, np.mean([ndcg for _, ndcg in loaded], axis=0)


def main(
    reference: Annotated[list[Path], typer.Option(help="The reference's seeds (.npz).")],
    other: Annotated[list[Path], typer.Option(help="The compared setting's seeds (.npz).")],
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report here.")] = None,
) -> None:
    """Print (and with --json keep) the seed means' interval and every seed pair's."""
    report = paired_report(_side(reference), [_side(other)])
    report["seed_pairs"] = [
        {"reference": str(ref), "other": str(oth), **_pair(ref, oth)}
        for ref in reference
        for oth in other
    ]
    text = json.dumps(report, indent=2) + "\n"
    if json_path:
        json_path.write_text(text)
    typer.echo(text, nl=False)


def _pair(reference: Path, other: Path) -> dict[str, float]:
    result = paired_report(load_per_user(reference), [load_per_user(other)])["results"][0]
    return {k: result[k] for k in ("vs_reference", "ci95_low", "ci95_high")}


if __name__ == "__main__":
    typer.run(main)
