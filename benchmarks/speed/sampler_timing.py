"""Sampler timing behind `bench samplers`: ms per batch of shared negatives, per update.

For each catalogue size n: a random L2-normalised item table `[n + 1, d]` and B queries near
random items; every sampler is built from the registry with its settings class's defaults (but
`per_query` off), refreshed, then timed drawing m shared negatives (median and minimum over the
repeats, after one warm-up draw), and timed on `update` of 10,000 changed rows. The kernel
samplers run with D = each of `--features` (rff: D frequencies, 2D features; quadratic: d^2 + 1
features, D not applicable).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import options
from benchmarks.harness.sampler_keys import own_keys
from training.sampler_settings import SampledSettings, validate_sampler
from training.samplers import SAMPLERS, SamplerContext, build_sampler
from training.samplers.rff import RFFSettings

BASELINES = ("uniform", "popularity", "exact", "quadratic")


def _table(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    emb = torch.nn.functional.normalize(torch.randn(n + 1, d, generator=gen), dim=-1)
    emb[0] = 0.0
    return emb


def _queries(emb: torch.Tensor, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Queries close to random items, so kernel distributions are peaked as in training."""
    rows = torch.randint(1, emb.shape[0], (batch,), generator=gen)
    noise = torch.randn(batch, emb.shape[1], generator=gen) / emb.shape[1] ** 0.5
    return torch.nn.functional.normalize(emb[rows] + noise, dim=-1)


def _times_ms(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _shared(name: str, **values: Any) -> SampledSettings:
    """`name`'s settings drawing shared negatives, with those of `values` that it has."""
    cfg = validate_sampler({"name": name, **own_keys(name, {"per_query": False, **values})})
    assert isinstance(cfg, SampledSettings), name  # every name timed here draws negatives
    return cfg


def _configs(features: list[int], leaf_sizes: list[int], dim: int) -> list[SampledSettings]:
    """The baselines once (quadratic's b is ceil((d^2 + 1) / d) anyway), rff per D and b.

    Leaf sizes that the tree raises to the same b (its floor ceil(2D / d): F = 2D features over
    d dimensions, the kernel tree's rule) run once.
    """
    configs = [_shared(name, leaf_size=min(leaf_sizes)) for name in BASELINES if name in SAMPLERS]
    for f in features:
        sizes = dict.fromkeys(max(b, math.ceil(2 * f / dim)) for b in leaf_sizes)
        configs += [_shared("rff", features=f, leaf_size=b) for b in sizes]
    return configs


def bench_one(
    cfg: SampledSettings, emb: torch.Tensor, queries: torch.Tensor, args: dict[str, int]
) -> dict[str, Any]:
    """Time one sampler on one table: draws of `args['num']` shared negatives, then update."""
    n, d = emb.shape[0] - 1, emb.shape[1]
    gen = torch.Generator().manual_seed(1)
    counts = torch.cat([torch.zeros(1), torch.rand(n, generator=gen) ** -1.2])
    ctx = SamplerContext(num_items=n, item_counts=counts, temperature=0.05)
    sampler = build_sampler(cfg, ctx)
    started = time.perf_counter()
    sampler.refresh(emb)
    build_s = time.perf_counter() - started
    positives = torch.randint(1, n + 1, (queries.shape[0],), generator=gen)
    with torch.no_grad():
        draws = _times_ms(lambda: sampler.sample(queries, positives, args["num"]), args["repeats"])
    rows = torch.randperm(n, generator=gen)[: args["changed"]] + 1
    new = torch.nn.functional.normalize(torch.randn(rows.numel(), d, generator=gen), dim=-1)
    updates = _times_ms(lambda: sampler.update(rows, new), max(1, args["repeats"] // 2))
    tree = getattr(sampler, "tree", None)
    return {
        "sampler": cfg.name,
        "items": n,
        "batch": queries.shape[0],
        "num_negatives": args["num"],
        "dim": d,
        "features": cfg.features if isinstance(cfg, RFFSettings) else None,
        "ms_per_batch": round(statistics.median(draws), 3),
        "ms_per_batch_min": round(min(draws), 3),
        "ms_update": round(statistics.median(updates), 3),
        "build_s": round(build_s, 3),
        "leaf_size": tree.b if tree is not None else None,
        "tree_mib": round(tree.memory_bytes() / 2**20, 1) if tree is not None else None,
    }


def run_benchmark(setting: dict[str, Any]) -> dict[str, Any]:
    """Every sampler at every catalogue size of `setting` (`bench samplers`' options): metrics."""
    torch.set_num_threads(setting["threads"])
    args = {"num": 1024, "repeats": setting["repeats"], "changed": 10_000}
    results = []
    for n in setting["items"]:
        gen = torch.Generator().manual_seed(n)
        emb = _table(n, 64, gen)
        queries = _queries(emb, 256, gen)
        for cfg in _configs(setting["features"], setting["leaf_sizes"], emb.shape[1]):
            row = bench_one(cfg, emb, queries, {**args, "changed": min(args["changed"], n)})
            sys.stderr.write(json.dumps(row) + "\n")
            results.append(row)
    return {"results": results, "torch": torch.__version__, "platform": platform.platform()}


def _label(row: dict[str, Any]) -> str:
    if row["sampler"] == "rff":
        return f"rff D={row['features']} b={row['leaf_size']}"
    return str(row["sampler"])


def plot(record: dict[str, Any], path: Path) -> None:
    """Two log-log panels: ms per batch of draws and ms per update, against n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    results = record["metrics"]["results"]
    for label in sorted({_label(r) for r in results}):
        rows = sorted((r for r in results if _label(r) == label), key=lambda r: r["items"])
        xs = [r["items"] for r in rows]
        axes[0].plot(xs, [r["ms_per_batch"] for r in rows], marker="o", label=label)
        axes[1].plot(xs, [r["ms_update"] for r in rows], marker="o", label=label)
    titles = ("1024 shared negatives, B = 256, d = 64", "update of 10,000 changed rows")
    for ax, title in zip(axes, titles, strict=True):
        ax.set(xscale="log", yscale="log", xlabel="items n", ylabel="ms", title=title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    options.save_figure(fig, path)
