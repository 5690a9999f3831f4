"""How many of tapas's kept negatives are another position's target in the same batch.

Usage: python -m benchmarks.studies.tapas_false_negatives RUN_DIR --out OUT [--batches B]
       [--ratios 1,8] [--temperatures 1.0,0.7,0.05] [--num-negatives 64]

The diagnostic docs/benchmarks/archive/sampler_comparison.md asks for ("Why tapas r = 8 is not
better than r = 1
here"). RUN_DIR is a finished run (`HOME/runs/NAME`); its best checkpoint stands in for the
model in the middle of a training. For B training batches in the training order of a seed (the
run's batch size and windows, every position a query), the query tower encodes every position
(eval mode); then, for each ratio r and second-pass temperature tau, a tapas sampler with the
run's tapas settings (tapas's defaults for a run of another sampler) draws
the batch's m shared negatives (the comparison sweep's m = 64 by default) from the model's
item table. Per (r, tau), over the B batches:

- `kept_batch_target_share`: the share of the kept negatives that are some query's target in
  the batch (the loss masks a negative only for the query whose own positive it is; for every
  other query with that target it pushes a positive down);
- `kept_queries_per_negative`: how many queries of the batch have a kept negative as their
  target, averaged over the kept negatives (the number of such pushes per negative);
- `kept_own_window_share`: the share of (query, kept negative) pairs where the negative is an
  item of the query's own window (its history, its own positive, or the user's later items in
  it): the pairs `loss.mask_user_items` masks (the positive's are masked in any case);
- `presample_batch_target_share`: the same share in the random first pass (what r = 1 keeps);
- `kept_median_train_count`, `presample_median_train_count`: how popular each set is.

The presample of a batch is the same draw for every tau (one generator seed per batch).
"""

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer

from benchmarks import records
from training.config_loading import load_stored_config
from training.corrections import query_windows
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.trainer import load_run
from training.samplers.base import SamplerContext
from training.samplers.tapas import TapasSampler, TapasSettings


def encoded_batches(run_dir: Path, batches: int) -> tuple[list[tuple[Any, ...]], Any, Any]:
    """B encoded training batches, the item table and the train counts.

    Each batch: (queries `[N, d]`, positives `[N]`, windows `[N, L + 1]`).
    """
    cfg, splits, module = load_run(run_dir)
    t = cfg.train
    data = SequenceDataModule(
        splits, cfg.model.max_len, t.batch_size, 512, bucket_by_length=t.bucket_by_length,
        seed=t.seed, targets=t.targets,
    )  # fmt: skip
    torch.manual_seed(t.seed)
    out = []
    with torch.no_grad():
        for inputs, targets in data.train_dataloader():
            keep = targets != 0
            queries = module.model.query_tower(inputs)[keep]
            out.append((queries, targets[keep], query_windows(inputs, targets)))
            if len(out) == batches:
                break
        items = module.model.item_tower.all_embeddings().detach()
    return out, items, item_counts(splits)


def tapas_sampler(
    run_dir: Path, ratio: float, tau: float, m: int, num_items: int, counts: Any
) -> TapasSampler:
    """A tapas sampler with the run's tapas settings (the defaults if it ran another sampler)."""
    run = load_stored_config(run_dir / "hparams.yaml")
    own = run.sampler if isinstance(run.sampler, TapasSettings) else TapasSettings()
    cfg = TapasSettings.model_validate({**own.model_dump(), "ratio": ratio, "num_negatives": m})
    ctx = SamplerContext(num_items, counts.to(torch.float32), run.model.temperature)
    sampler = TapasSampler(cfg, ctx)
    sampler.temperature = tau  # held at tau, not annealed
    return sampler


def draw_figures(sampler: Any, batches: list[tuple[Any, ...]], counts: np.ndarray) -> dict:
    """The figures of the module docstring for one sampler over the encoded batches."""
    kept_share, kept_pushes, pre_share, kept_counts, pre_counts = [], [], [], [], []
    own = []
    for index, (queries, positives, windows) in enumerate(batches):
        torch.manual_seed(index)  # the same presample for every temperature
        neg = sampler.sample(queries, positives, sampler.num_negatives)
        targets = np.bincount(positives.numpy(), minlength=len(counts))
        kept, pre = neg.ids.numpy(), neg.presample.ids.numpy()
        kept_share.append(float((targets[kept] > 0).mean()))
        kept_pushes.append(float(targets[kept].mean()))
        pre_share.append(float((targets[pre] > 0).mean()))
        own.append(float((windows.unsqueeze(2) == neg.ids.view(1, 1, -1)).any(1).float().mean()))
        kept_counts += counts[kept].tolist()
        pre_counts += counts[pre].tolist()
    return {
        "kept_batch_target_share": float(np.mean(kept_share)),
        "kept_queries_per_negative": float(np.mean(kept_pushes)),
        "kept_own_window_share": float(np.mean(own)),
        "presample_batch_target_share": float(np.mean(pre_share)),
        "kept_median_train_count": float(np.median(kept_counts)),
        "presample_median_train_count": float(np.median(pre_counts)),
    }


def measure(
    run_dir: Path, batches: int, ratios: list[float], temperatures: list[float], m: int = 64
) -> list[dict[str, Any]]:
    """One row per (r, tau)."""
    encoded, items, counts = encoded_batches(run_dir, batches)
    queries = sum(len(batch[1]) for batch in encoded) / len(encoded)
    rows = []
    for ratio in ratios:
        for tau in temperatures:
            sampler = tapas_sampler(run_dir, ratio, tau, m, items.shape[0] - 1, counts)
            sampler.refresh(items)
            figures = draw_figures(sampler, encoded, counts.numpy())
            setting = {"ratio": ratio, "tau": tau, "m": sampler.num_negatives}
            shape = {"batches": len(encoded), "queries_per_batch": queries}
            rows.append({**setting, **shape, **figures})
    return rows


def main(
    run: Annotated[Path, typer.Argument(help="A finished run folder (HOME/runs/NAME).")],
    json_out: Annotated[Path, typer.Option("--out", help="Result JSON.")],
    batches: Annotated[int, typer.Option(help="Training batches encoded.")] = 50,
    ratios: Annotated[str, typer.Option(help="Comma-separated presample ratios r.")] = "1,8",
    temperatures: Annotated[
        str, typer.Option(help="Comma-separated second-pass temperatures.")
    ] = "1.0,0.7,0.05",
    num_negatives: Annotated[int, typer.Option(help="m, the negatives kept.")] = 64,
) -> None:
    """Write one row per (r, tau) as a record."""
    started = records.start()
    rows = measure(
        run, batches, [float(r) for r in ratios.split(",")],
        [float(t) for t in temperatures.split(",")], num_negatives,
    )  # fmt: skip
    for row in rows:
        typer.echo(json.dumps(row))
    setting = {"run": str(run), "batches": batches, "ratios": ratios,
               "temperatures": temperatures, "num_negatives": num_negatives}  # fmt: skip
    records.save(json_out, setting, {"rows": rows}, started)


if __name__ == "__main__":
    typer.run(main)
