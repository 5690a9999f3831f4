"""Where a refit retrain's test NDCG@10 comes from: its kept round, and what the refit adds.

Usage: python -m benchmarks.studies.retrain_kept_rounds --run HOME/runs/VERSION [--run ...]
    --out FILE

For each finished run of `studies/retrain_warm.py` (or any refit run) the kept round
(`checkpoints/best.ckpt`) and the refit model (`checkpoints/refit.ckpt`) are ranked on the
run's own val and test rows (full ranking, seen items masked, the metric of `recsys
evaluate`; the refit model has trained on the val rows, so its val figure is not held out),
and the item table's mean row norm is read off each: with cosine logits an Adam step of a
given size turns a longer row by a smaller angle, so a longer-trained table moves less per
refit epoch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import torch
import typer

from benchmarks import records
from benchmarks.harness.paired import per_user_ndcg
from training.loop.checkpoints import BEST_CHECKPOINT, REFIT_CHECKPOINT

ITEM_TABLE = "model.item_tower.embedding.weight"


def _checkpoint_figures(run: Path, checkpoint: str) -> dict[str, Any]:
    """Val and test NDCG@10 and the mean item-row norm of one checkpoint of `run`."""
    path = run / "checkpoints" / checkpoint
    figures: dict[str, Any] = {
        split: round(float(per_user_ndcg(run, checkpoint=path, split=split)[1].mean()), 5)
        for split in ("val", "test")
    }
    table = torch.load(path, map_location="cpu", weights_only=False)["state_dict"][ITEM_TABLE]
    figures["item_row_norm"] = round(float(table[1:].norm(dim=1).mean()), 3)  # row 0: padding
    return figures


def main(
    run: Annotated[list[Path], typer.Option(help="A run directory (repeatable).")],
    json_path: Annotated[Path, typer.Option("--out", help="Write the results here.")],
) -> None:
    """Rank each run's kept round and refit model; write a record with one row per run."""
    started = records.start()
    torch.set_num_threads(1)
    rows = []
    for path in run:
        kept = _checkpoint_figures(path, BEST_CHECKPOINT)
        refit = _checkpoint_figures(path, REFIT_CHECKPOINT)
        lift = refit["test"] / kept["test"] - 1.0
        rows.append({"run": str(path), "kept": kept, "refit": refit, "refit_test_lift": lift})
        print(json.dumps(rows[-1]), flush=True)
    config = {"runs": [str(path) for path in run]}
    records.save(json_path, config, {"results": rows}, started, threads=1)


if __name__ == "__main__":
    typer.run(main)
