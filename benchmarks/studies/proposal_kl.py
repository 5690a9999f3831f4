"""How far each sampler's proposal is from a trained model's softmax: KL(p || q) per sampler.

Usage: python -m benchmarks.studies.proposal_kl --home HOME --out FILE [--run NAME]
    [--queries N] [--rff-features D,D] [--rff-nu NU,NU] [--score-floors F,F] [--leaf-sizes B,B]

HOME is a workspace with a training run (`recsys train`, or `bench quality --home HOME`);
that run (the newest unless --run names one) gives the config (`hparams.yaml`) and the trained
towers (`best.ckpt`). The queries are the query tower's vectors for the first `--queries`
validation examples, as the training loop's `val/proposal_kl` uses them. Every sampler is
built as training builds it (its settings class's defaults), refreshed on the
checkpoint's item table, and measured with `training.diagnostics.proposal_kl`: shared (one
proposal for the batch, the one the shared draws use: the kernel samplers' summed kernel
sum_b K(h_b, c), the exact sampler's equal-weight mixture of the queries' softmaxes) and, for
the kernel samplers, per query. rff runs once per (D, nu, score floor, leaf size) of the lists
given; a leaf size of n or more leaves one bucket, so the draw is the exact Gaussian kernel at
nu with no RFF noise (the bias floor of that nu).
Uniform KL is log n - H(p); a proposal above it is worse than uniform.
"""

import json
import math
from pathlib import Path
from typing import Annotated, Any

import torch
import typer

from benchmarks import records
from training.config import RecsysConfig
from training.diagnostics import proposal_kl
from training.evaluation.ranking import rank_batch
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.trainer import load_run
from training.sampler_settings import SampledSettings, validate_sampler
from training.samplers import SamplerContext, build_sampler


def _run_dir(home: Path, name: str | None) -> Path:
    """The run called `name`, else the newest run with a best checkpoint."""
    runs = sorted(p.parent.parent for p in (home / "runs").glob("*/checkpoints/best.ckpt"))
    if name is not None:
        runs = [r for r in runs if r.name == name]
    if not runs:
        raise typer.BadParameter(f"{home}: no run {name or ''} with a best checkpoint")
    return runs[-1]


def _trained(
    run: Path, num_queries: int
) -> tuple[RecsysConfig, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The run's config, `[n + 1]` item counts, and (queries `[Q, d]`, item table `[n + 1, d]`)."""
    cfg, splits, module = load_run(run)
    counts = item_counts(splits)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size, num_queries)
    batch = dm.val_set[list(range(min(num_queries, len(dm.val_set))))]  # the first users
    with torch.no_grad():
        item_emb = module.model.item_tower.all_embeddings()
        _, _, queries = rank_batch(
            module.model.query_tower, item_emb, batch, cfg.model.temperature, True, 65536
        )
    return cfg, counts, (queries, item_emb)


def measure(
    home: Path,
    run_name: str | None,
    num_queries: int,
    rff_features: list[int],
    rff_nu: list[float],
    score_floors: list[float],
    leaf_sizes: list[int],
) -> dict[str, Any]:
    """KL rows for uniform, popularity, exact, quadratic and rff (each D, nu, floor, leaf)."""
    run = _run_dir(home, run_name)
    cfg, counts, (queries, item_emb) = _trained(run, num_queries)
    n = item_emb.shape[0] - 1
    ctx = SamplerContext(n, counts, cfg.model.temperature)
    variants: list[tuple[str, dict[str, Any]]] = [("uniform", {}), ("popularity", {}),
                                                  ("exact", {}), ("quadratic", {})]  # fmt: skip
    variants += [
        ("rff", {"features": d, "nu": nu, "score_floor": floor, "leaf_size": b})
        for d in rff_features
        for nu in rff_nu
        for floor in score_floors
        for b in leaf_sizes
    ]
    rows = []
    for name, extra in variants:
        for per_query in (False, True) if name in ("quadratic", "rff") else (False,):
            sampler_cfg = validate_sampler({"name": name, **extra, "per_query": per_query})
            assert isinstance(sampler_cfg, SampledSettings)  # each of `variants` draws
            sampler = build_sampler(sampler_cfg, ctx)
            if hasattr(sampler, "refresh"):
                sampler.refresh(item_emb)
            kl = proposal_kl(
                sampler, queries, item_emb, cfg.model.temperature, cfg.ranks_by_magnitude
            )
            rows.append({"sampler": name, **extra, "per_query": per_query, "kl": kl})
            typer.echo(json.dumps(rows[-1]), err=True)
    return {
        "home": str(home), "run": run.name, "items": n, "queries": int(queries.shape[0]),
        "temperature": cfg.model.temperature, "log_n": math.log(n), "results": rows,
    }  # fmt: skip


def main(
    home: Annotated[Path, typer.Option(help="Workspace with a training run.")],
    json_path: Annotated[Path, typer.Option("--out", help="Write the results here.")],
    queries: Annotated[int, typer.Option(help="Validation queries measured.")] = 256,
    rff_features: Annotated[str, typer.Option(help="Comma-separated RFF D values.")] = "128,512",
    rff_nu: Annotated[str, typer.Option(help="Comma-separated RFF kernel nu values.")] = "4",
    score_floors: Annotated[str, typer.Option(help="Comma-separated tree score floors.")] = "1e-6",
    leaf_sizes: Annotated[str, typer.Option(help="Comma-separated rff leaf sizes b.")] = "32",
    run: Annotated[
        str | None, typer.Option(help="Run name under HOME/runs.", show_default="the newest")
    ] = (None),
) -> None:
    """Measure and write the KL table as a record."""
    started = records.start()
    torch.set_num_threads(1)
    features, nus = [int(x) for x in rff_features.split(",")], [float(x) for x in rff_nu.split(",")]
    floors, leaves = (
        [float(x) for x in score_floors.split(",")],
        [int(x) for x in leaf_sizes.split(",")],
    )
    result = measure(home, run, queries, features, nus, floors, leaves)
    setting = {
        "home": str(home), "run": run, "queries": queries, "rff_features": features,
        "rff_nu": nus, "score_floors": floors, "leaf_sizes": leaves,
    }  # fmt: skip
    records.save(json_path, setting, result, started, threads=1)


if __name__ == "__main__":
    typer.run(main)
