"""Step timing behind `bench train-step`: milliseconds per whole training step.

A step is what training runs per batch (`RetrievalModule.optimisation_step`): query tower
forward over B histories, the loss (sampled softmax over the sampler's negatives, or the full
softmax over all n items), backward, every optimiser, and the sampler's update with the rows
that changed; not the Lightning callbacks around it (the weight average's pass over the
parameters, `train.ema_decay`). Each sampler runs with its preset as `recsys train --sampler
NAME` applies it (per-query draws where that is its default), then the `--set` overrides.
Every position of the B histories is a query, N = B L (`train.targets=all`, the committed
records' targets, with their cosine logits and bsarec's causal low-pass; `--set
train.targets=last` times one query a history).
Sampled runs use sparse id tables (`SparseAdam`, only touched rows move); the full softmax
needs dense Adam, since every row gets a gradient. The item table is random and the histories
are drawn from a Zipf-like popularity, so timings do not depend on data. Each row also says
where the step's time went (`step_phases`), the sampler's shape as built, the item rows the
step touched and the memory traffic that implies (`step_traffic`, per-query draws).
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import options
from benchmarks.harness.sampler_keys import own_keys
from benchmarks.speed.step_phases import PhaseClock, sampler_shape
from benchmarks.speed.step_traffic import traffic_mb
from data.errors import RecsysInputError
from training.config import RecsysConfig
from training.config_loading import build_run_config, parse_override
from training.loop.module_build import build_module
from training.precision import resolve_precision

FULL = "full"


def zipf_counts(n: int, gen: torch.Generator) -> torch.Tensor:
    """`[n + 1]` Zipf-like interaction counts (index 0, padding, is 0)."""
    ranks = torch.randperm(n, generator=gen).to(torch.float64) + 1.0
    return torch.cat([torch.zeros(1, dtype=torch.float64), 1e6 * ranks**-1.0 + 1.0])


def random_batch(
    counts: torch.Tensor, batch: int, length: int, gen: torch.Generator, every: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """B full histories `[B, L]` and their next items: at every position (`every`) or the last."""
    items = torch.multinomial(counts.to(torch.float32), batch * (length + 1), True, generator=gen)
    seq = items.reshape(batch, length + 1)
    if every:
        return seq[:, :-1], seq[:, 1:].clone()
    targets = torch.zeros(batch, length, dtype=torch.int64)
    targets[:, -1] = seq[:, -1]
    return seq[:, :-1], targets


def step_config(
    sampler: str, tower: str, args: dict[str, Any], tapas_ratio: int | None = None
) -> RecsysConfig:
    """The config of one timed cell: a sampler (tapas at one r) and a tower, fp32.

    As `recsys train --sampler NAME --num-negatives m --set ...` builds it: the sampler's
    preset (its settings class's defaults and what it pairs with), the bench's shapes, then
    `args["overrides"]` (`--set`), then m where the sampler draws m (not the full softmax).
    """
    ratio = [] if tapas_ratio is None else [f"sampler.ratio={tapas_ratio}"]
    shapes = [
        f"model.dim={args['dim']}",
        f"model.tower={tower}",
        f"model.max_len={args['length']}",
        f"train.sparse_embeddings={str(sampler != FULL).lower()}",
        "train.precision=fp32",  # the committed figures' precision, whatever the CPU
        "train.targets=all",  # and their queries and logits
        *(["model.tower.window=causal"] if tower == "bsarec" else []),  # what targets=all needs
        "model.normalize=true",
    ]
    m = own_keys(sampler, {"num_negatives": args["num_negatives"]}).get("num_negatives")
    sets = own_overrides(sampler, args.get("overrides", ()))
    return build_run_config(overrides=[*shapes, *ratio, *sets], sampler=sampler, num_negatives=m)


def own_overrides(sampler: str, overrides: Iterable[str]) -> list[str]:
    """The `--set` overrides of one cell: a `sampler.KEY` one only where `sampler` has KEY."""
    kept = []
    for text in overrides:
        keys, _ = parse_override(text)
        if keys[0] != "sampler" or len(keys) != 2 or own_keys(sampler, {keys[1]: None}):
            kept.append(text)
    return kept


def refuse_unused_overrides(samplers: list[str], overrides: Iterable[str]) -> None:
    """Refuse a `sampler.KEY` override that no timed sampler has (a typo would time nothing).

    Raises:
        RecsysInputError: naming the override.

    """
    for text in overrides:
        if not any(text in own_overrides(sampler, [text]) for sampler in samplers):
            raise RecsysInputError(f"--set {text}: no sampler of --samplers has that key")


def cell_configs(
    samplers: list[str], towers: list[str], args: dict[str, Any]
) -> list[tuple[RecsysConfig, int | None]]:
    """Each (tower, sampler, tapas r) cell's config and r, in run order, built before any runs.

    Raises:
        RecsysInputError: a cell's config is bad (an unknown tower), naming the cell.

    """
    keys = [
        (tower, sampler, ratio) for tower in towers for sampler in samplers
        for ratio in (args["tapas_ratios"] if sampler == "tapas" else [None])
    ]  # fmt: skip
    refuse_unused_overrides(samplers, args.get("overrides", ()))
    cells: list[tuple[RecsysConfig, int | None]] = []
    for tower, sampler, ratio in keys:
        try:
            cells.append((step_config(sampler, tower, args, ratio), ratio))
        except RecsysInputError as err:
            raise RecsysInputError(f"tower {tower!r}, sampler {sampler!r}: {err}") from None
    return cells


def bench_one(
    cfg: RecsysConfig,
    n: int,
    counts: torch.Tensor,
    args: dict[str, Any],
    tapas_ratio: int | None = None,
) -> dict[str, Any]:
    """One cell's row: ms per step (median, minimum) of a sampler and tower on n items.

    With the mean ms of each phase (`step_phases`), the sampler's shape as built, the rows
    touched and their modelled traffic (`step_traffic`).
    """
    sampler = cfg.sampler.name
    tower = getattr(cfg.model.tower, "name", cfg.model.tower)  # a settings section, or its name
    gen = torch.Generator().manual_seed(n)
    torch.manual_seed(n)
    module = build_module(cfg, n, counts)
    module.on_train_start()  # the sampler's initial state, as in training
    opts = module.standalone_optimizers()
    clock = PhaseClock()
    backward = clock.attach(module, opts)
    every = cfg.train.targets == "all"
    batches = [random_batch(counts, args["batch"], args["length"], gen, every) for _ in range(2)]
    times = []
    for step in range(args["repeats"] + 1):  # step 0 warms up (allocations, Adam state)
        started = time.perf_counter()
        module.optimisation_step(batches[step % 2], opts, backward)
        if step:
            times.append((time.perf_counter() - started) * 1000)
        else:
            clock.reset()
    row = {
        "sampler": sampler,
        "tapas_ratio": tapas_ratio,
        "items": n,
        "batch": args["batch"],
        "queries": int((batches[0][1] != 0).sum()),
        "num_negatives": getattr(cfg.sampler, "num_negatives", None),
        **sampler_shape(module),
        "dim": args["dim"],
        "tower": tower,
        "history": args["length"],
        "optimizer": "Adam + SparseAdam (id tables)"
        if cfg.train.sparse_embeddings
        else "Adam (dense)",
        "ms_per_step": round(statistics.median(times), 3),
        "ms_per_step_min": round(min(times), 3),
        "phases_ms": clock.per_step_ms(times),
        "touched_rows": round(clock.touched_rows()),
    }
    return {**row, "traffic_mb": traffic_mb(row, module.sampler, clock.touched_rows())}


def run_benchmark(setting: dict[str, Any]) -> dict[str, Any]:
    """Every sampler (and `full`) with every tower at every catalogue size: the metrics.

    `setting`: `bench train-step`'s options (items, samplers, towers, batch, ...).

    Raises:
        RecsysInputError: a cell's config is bad (`cell_configs`): before any cell runs.

    """
    cells = cell_configs(setting["samplers"], setting["towers"], setting)
    torch.set_num_threads(setting["threads"])
    load_at_start = _loadavg()
    results = []
    for n in setting["items"]:
        counts = zipf_counts(n, torch.Generator().manual_seed(0))
        for cfg, ratio in cells:
            row = bench_one(cfg, n, counts, setting, ratio)
            sys.stderr.write(json.dumps(row) + "\n")
            results.append(row)
    used = {resolve_precision(cfg.train.precision, torch.device("cpu")) for cfg, _ in cells}
    metrics = {
        "results": results, "precision": "/".join(sorted(used)),  # fp32 unless --set changes it
        "torch": torch.__version__, "platform": platform.platform(),
        "proc_loadavg_at_start": load_at_start, "proc_loadavg_at_end": _loadavg(),
    }  # fmt: skip
    return {**metrics, "speedup_vs_full": speedups(results),
            "tapas_cost_vs_smallest_ratio": tapas_costs(results)}  # fmt: skip


def _loadavg() -> str:
    """`/proc/loadavg` as it reads (load over 1, 5, 15 min, runnable/all tasks, last pid)."""
    path = Path("/proc/loadavg")
    return path.read_text().strip() if path.exists() else "n/a"


def label(row: dict[str, Any]) -> str:
    """A row's sampler name, with its presample factor for tapas (`tapas r=8`)."""
    ratio = row.get("tapas_ratio")
    return row["sampler"] if ratio is None else f"{row['sampler']} r={ratio}"


def tapas_costs(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per `"<tower> n=<items>"`: each tapas r's ms per step / the smallest r's (target <= 1.15)."""
    out: dict[str, dict[str, float]] = {}
    for tower, n in dict.fromkeys((r["tower"], r["items"]) for r in results):
        rows = sorted(
            (r for r in results
             if (r["tower"], r["items"]) == (tower, n) and r["sampler"] == "tapas"),
            key=lambda r: r["tapas_ratio"],
        )  # fmt: skip
        if len(rows) > 1:
            base = rows[0]["ms_per_step"]
            out[f"{tower} n={n}"] = {label(r): round(r["ms_per_step"] / base, 3) for r in rows}
    return out


def speedups(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per `"<tower> n=<items>"`: full-softmax ms per step / each sampler's ms per step."""
    out: dict[str, dict[str, float]] = {}
    for tower, n in dict.fromkeys((r["tower"], r["items"]) for r in results):
        rows = {
            label(r): r["ms_per_step"] for r in results if (r["tower"], r["items"]) == (tower, n)
        }
        if FULL in rows:
            out[f"{tower} n={n}"] = {
                s: round(rows[FULL] / ms, 1) for s, ms in rows.items() if s != FULL and ms > 0
            }
    return out


def plot(record: dict[str, Any], path: Path) -> None:
    """One log-log panel per query tower: ms per step against n, one line per sampler."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, setup = record["metrics"]["results"], record["config"]
    towers = list(dict.fromkeys(r["tower"] for r in results))
    fig, axes = plt.subplots(1, len(towers), figsize=(6 * len(towers), 4.2), squeeze=False)
    for ax, tower in zip(axes[0], towers, strict=True):
        mine = [r for r in results if r["tower"] == tower]
        for sampler in dict.fromkeys(label(r) for r in mine):
            rows = sorted((r for r in mine if label(r) == sampler), key=lambda r: r["items"])
            xs, ys = [r["items"] for r in rows], [r["ms_per_step"] for r in rows]
            ax.plot(xs, ys, "o-", label=sampler)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="items n",
            ylabel="ms per training step",
            title=f"{tower} tower over {setup['length']} items: B = {setup['batch']}, "
            f"d = {setup['dim']}, m = {setup['num_negatives']}",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    options.save_figure(fig, path)
