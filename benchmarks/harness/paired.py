"""Per-user test NDCG@k of a finished run; bootstrap intervals of one run and of two, paired.

Shared by `studies/paired_ndcg.py` and the sampler sweep (`bench quality --grid`):
every run of one home is scored on the same test examples (leave-one-out, full ranking, seen
items masked, the metric of `recsys evaluate`), so two runs' per-user figures pair user by user.
The interval covers the test set's sampling noise only, not seed-to-seed training noise.
"""

from __future__ import annotations

import json
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

    from training.evaluation.metrics import ndcg_per_user
    from training.evaluation.ranking import rank_loader
    from training.loop.datamodule import SequenceDataModule
    from training.loop.trainer import load_run

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
        "num_negatives": getattr(cfg.sampler, "num_negatives", None),  # None: full softmax
        "per_query": getattr(cfg.sampler, "per_query", False),  # a sampler that may draw so
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


def paired_report(
    reference: tuple[dict[str, Any], np.ndarray],
    runs: list[tuple[dict[str, Any], np.ndarray]],
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Each run's paired interval against `reference`; each a (label, `[U]` per-user NDCG@10).

    Raises:
        ValueError: a run scored on another number of users than the reference.

    """
    ref_label, ref = reference
    rows = []
    for label, ndcg in runs:
        if len(ndcg) != len(ref):
            raise ValueError(f"{label['run']}: {len(ndcg)} test users, reference has {len(ref)}")
        rel, low, high = paired_interval(ref, ndcg, resamples, seed)
        rows.append({**label, "ndcg@10": float(ndcg.mean()), "vs_reference": rel,
                     "ci95_low": low, "ci95_high": high})  # fmt: skip
    return {
        "reference": {**ref_label, "ndcg@10": float(ref.mean())},
        "users": len(ref), "resamples": resamples, "seed": seed, "results": rows,
    }  # fmt: skip


def save_per_user(path: Path, label: dict[str, Any], ndcg: np.ndarray) -> None:
    """Keep a run's label and per-user NDCG in `path` (.npz): pairs need no run then."""
    np.savez_compressed(path, ndcg=ndcg, label=np.array(json.dumps(label)))


def load_per_user(path: Path) -> tuple[dict[str, Any], np.ndarray]:
    """The (label, per-user NDCG) `save_per_user` wrote."""
    with np.load(path) as saved:
        return json.loads(str(saved["label"])), saved["ndcg"]
