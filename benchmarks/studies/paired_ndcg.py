"""Is a sampler's test NDCG@10 gap to the reference model real? A paired bootstrap over users.

Usage: python -m benchmarks.studies.paired_ndcg --reference RUN --run RUN [--run RUN ...]
    --out FILE [--resamples N] [--seed S]

RUN is a training run directory (`HOME/runs/NAME`, as `recsys train` or `bench quality
--home HOME` leave them) holding `hparams.yaml` and `checkpoints/best.ckpt`. Every run is
scored on the same test examples (its home's leave-one-out split, full ranking, seen items
masked, the metric of `recsys evaluate`); the per-user NDCG@10 of each run is paired with the
reference's, and users are resampled with replacement to give a 95% interval of the relative
difference mean(run) / mean(reference) - 1. The interval covers the test set's sampling noise
only, not seed-to-seed training noise. The scoring and the bootstrap live in
`harness/paired.py` (the sampler sweep uses them too).
"""

import json
from pathlib import Path
from typing import Annotated

import torch
import typer

from benchmarks import records
from benchmarks.harness.paired import paired_report, per_user_ndcg


def main(
    reference: Annotated[Path, typer.Option(help="Run directory of the reference model.")],
    run: Annotated[list[Path], typer.Option(help="Run directory to compare (repeatable).")],
    json_path: Annotated[Path, typer.Option("--out", help="Write the results here.")],
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Score every run on the test split and write the paired intervals as a record."""
    started = records.start()
    torch.set_num_threads(1)
    scored = [per_user_ndcg(path) for path in run]
    try:
        result = paired_report(per_user_ndcg(reference), scored, resamples, seed)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    for row in result["results"]:
        typer.echo(json.dumps(row), err=True)
    config = {"reference": str(reference), "runs": [str(path) for path in run],
              "resamples": resamples, "seed": seed}  # fmt: skip
    records.save(json_path, config, result, started, threads=1)


if __name__ == "__main__":
    typer.run(main)
