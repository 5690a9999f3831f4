"""Per-user test NDCG@k of a finished run; bootstrap intervals of one run and of two, paired.

Shared by `benchmarks/paired_ndcg.py` and the sampler sweep (`recsys bench quality --grid`):
every run of one home is scored on the same test examples (leave-one-out, full ranking, seen
items masked, the metric of `recsys evaluate`), so two runs' per-user figures pair user by user.
The interval covers the test set's sampling noise only, not seed-to-seed training noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np


def per_user_ndcg(
    run: Path, k: int = 10, checkpoint: Path | None = None, split: Literal["test", "val"] = "test"
) -> tuple[dict[str, Any], np.ndarray]:
    """The run's label and `[U]` per-user NDCG@k on `split` (0 where the target ranks below k).

    `checkpoint`: the model to rank (default: the run's final one, as it measured on test);
    `split`: "test" or "val".

    Torch and Lightning are imported here, not with the module: the CLI imports this module
    before it sets up logging, and Lightning imported first prints its own start-up chatter.
    """
    import torch

    from training.datamodule import SequenceDataModule
    from training.evaluation import rank_loader
    from training.metrics import ndcg_per_user
    from training.trainer import load_run

    cfg, splits, module = load_run(run, checkpoint)
    dm = SequenceDataModule(splits, cfg.model.max_len, 1, cfg.train.eval_batch_size)
    loader = dm.test_dataloader() if split == "test" else dm.val_dataloader()
    with torch.no_grad():
        item_emb = module.model.item_tower.all_embeddings()
    ranks, _ = rank_loader(
        module.model.query_tower, item_emb, loader, cfg.model.temperature, cfg,
        absolute=cfg.ranks_by_magnitude,
    )  # fmt: skip
    label = {
        "run": str(run),
        "sampler": cfg.sampler.name,
        "num_negatives": None if cfg.sampler.name == "full" else cfg.sampler.num_negatives,
        "per_query": cfg.sampler.per_query,
    }
    return label, ndcg_per_user(ranks, k).numpy()


def paired_interval(
    ref: np.ndarray, other: np.ndarray, resamples: int, seed: int
) -> tuple[float, float, float]:
    """Relative difference of means and its 95% bootstrap interval, users resampled in pairs."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ref), size=(resamples, len(ref)))
    ratios = other[idx].mean(1) / ref[idx].mean(1) - 1.0
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(other.mean() / ref.mean() - 1.0), float(low), float(high)


def mean_interval(values: np.ndarray, resamples: int, seed: int) -> tuple[float, float, float]:
    """Mean of `values [U]` and its 95% bootstrap interval, users resampled."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)
