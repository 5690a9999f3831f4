"""Where a real training step's time goes, behind `bench profile`.

One Lightning epoch (or its first `steps` batches, the first WARMUP_STEPS not profiled) on a
real dataset with the shipped config (the same DataModule, module and optimisers as `recsys
train`), then one full validation round:
- the step's phases from the profiler labels the LightningModule sets (`lit_module.PHASES`:
  tower forward, sampler draw, loss, backward, optimiser, sampler update);
- "lightning in step": the rest of a step's wall time (Lightning's loop, `self.log`);
- "data and loop": wall time between one step's end and the next step's start (the batch
  fetch and Lightning's bookkeeping);
- the validation round's wall time, and the step's arithmetic limit: its FLOPs (counted by
  torch's FlopCounterMode over forward and backward) at the matmul rate measured on this
  machine with the same threads.
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl_lightning
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.flop_counter import FlopCounterMode

from data.datasets import prepare_dataset
from data.errors import RecsysInputError
from data.split import build_splits
from data.workspace import Workspace
from training.config import RecsysConfig
from training.config_loading import build_run_config
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.interrupt import interruptible_fit
from training.loop.lit_module import PHASES, RetrievalModule
from training.loop.module_build import build_module
from training.precision import resolve_precision

WARMUP_STEPS = 5  # allocations, Adam state: not profiled


class StepClock(pl_lightning.Callback):
    """Wall times of steps, of the gaps between them, and of the validation round."""

    def __init__(self, prof: profile) -> None:
        self.prof = prof
        self.steps: list[float] = []
        self.gaps: list[float] = []
        self.validation_s = 0.0
        self._start = self._end = 0.0

    def on_train_batch_start(self, *args: Any) -> None:  # noqa: D102
        self._start = time.perf_counter()
        if self._end:
            self.gaps.append(self._start - self._end)

    def on_train_batch_end(self, *args: Any) -> None:  # noqa: D102
        self.steps.append(time.perf_counter() - self._start)
        self.prof.step()  # the profiler's own work: in neither the step nor the next gap
        self._end = time.perf_counter()

    def on_validation_epoch_start(self, *args: Any) -> None:  # noqa: D102
        self._start = time.perf_counter()

    def on_validation_epoch_end(self, *args: Any) -> None:  # noqa: D102
        self.validation_s = time.perf_counter() - self._start


def _matmul_gflops(rows: int, cols: int, dim: int) -> float:
    """fp32 GFLOP/s of a `[rows, dim] @ [dim, cols]` product on this machine, now."""
    a, b = torch.randn(rows, dim), torch.randn(dim, cols)
    a @ b
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    return 2 * rows * cols * dim * 10 / (time.perf_counter() - start) / 1e9


def _flops_per_step(module: RetrievalModule, dm: SequenceDataModule, steps: int) -> float:
    """Mean FLOPs of a whole step (forward and backward) over the profiled batches.

    A fresh loader yields the epoch's batches in the fit's order (same seed, epoch 0), so the
    counted batches are the profiled ones (their trimmed widths vary a lot).
    """
    opts = module.standalone_optimizers()
    counter = FlopCounterMode(display=False)
    batches = iter(dm.train_dataloader())
    for _ in range(WARMUP_STEPS):
        next(batches)
    with counter:
        for _ in range(steps):
            module.optimisation_step(next(batches), opts, torch.Tensor.backward)
    return float(counter.get_total_flops()) / steps


def _phase_ms(prof: profile, steps: int) -> dict[str, float]:
    totals = {e.key: e.cpu_time_total for e in prof.key_averages()}
    return {name: totals.get(label, 0.0) / 1000 / steps for name, label in PHASES.items()}


def profile_sampler(ws: Workspace, dataset: str, cfg: RecsysConfig, args: dict[str, Any]) -> dict:
    """Profile one sampler's training steps and validation round (see the module docstring)."""
    torch.set_num_threads(args["threads"])
    sampler = cfg.sampler.name
    prepare_dataset(ws, dataset)
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    dm = SequenceDataModule.of(
        splits, cfg.train.model_copy(update={"num_workers": 0}), cfg.model.max_len
    )
    pl_lightning.seed_everything(cfg.train.seed, verbose=False)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    steps = min(args["steps"] or len(dm.train_dataloader()), len(dm.train_dataloader()))
    steps -= WARMUP_STEPS
    if steps < 1:
        raise RecsysInputError(f"{dataset}: too few training batches to profile")
    plan = schedule(skip_first=WARMUP_STEPS - 1, wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=plan) as prof:
        clock = StepClock(prof)
        trainer = pl_lightning.Trainer(
            max_epochs=1, limit_train_batches=steps + WARMUP_STEPS, callbacks=[clock],
            logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu",
        )  # fmt: skip
        interruptible_fit(trainer, module, datamodule=dm)
    m = getattr(cfg.sampler, "num_negatives", None)  # None: the full softmax draws none
    return _summary(m, sampler, dm, module, clock, prof, steps)


def _summary(
    m: int | None, sampler: str, dm: SequenceDataModule, module: RetrievalModule,
    clock: StepClock, prof: profile, steps: int,
) -> dict[str, Any]:  # fmt: skip
    step_ms = 1000 * statistics.mean(clock.steps[WARMUP_STEPS:])
    # gaps[i] comes before step i + 1: the gap before each profiled step
    gap_ms = 1000 * statistics.mean(clock.gaps[WARMUP_STEPS - 1 :])
    phases = _phase_ms(prof, steps)
    phases["lightning in step"] = step_ms - sum(phases.values())
    phases["data and loop"] = gap_ms
    flops = _flops_per_step(module, dm, steps)
    rate = _matmul_gflops(512, dm.num_items, 256)
    batches_per_epoch = len(dm.train_dataloader())
    return {
        "sampler": sampler,
        "num_negatives": None if sampler == "full" else m,
        "precision": resolve_precision(module.cfg.train.precision, module.device),
        "steps_profiled": steps,
        "ms_per_step": round(step_ms + gap_ms, 1),
        "phases_ms": {k: round(v, 2) for k, v in phases.items()},
        "validation_s": round(clock.validation_s, 4),
        "validation_users": len(dm.val_set),
        "batches_per_epoch": batches_per_epoch,
        "epoch_s": round(batches_per_epoch * (step_ms + gap_ms) / 1000 + clock.validation_s, 1),
        "flops_per_step": int(flops),
        "matmul_gflops": round(rate, 1),
        "arithmetic_limit_ms": round(flops / (rate * 1e9) * 1000, 3),
    }


def run_profiles(home: Path, dataset: str, setting: dict[str, Any]) -> dict[str, Any]:
    """Every sampler's profile on `dataset` (a path or `synthetic`): the metrics.

    `setting`: `bench profile`'s options (samplers, steps, num_negatives, threads, overrides);
    `num_negatives` is the m of every sampler but the full softmax, which draws none.

    Raises:
        RecsysInputError: a sampler's config is bad (an unknown name): before anything runs.

    """
    # fp32 (`--set train.precision=...` overrides it): the arithmetic limit is fp32's matmul rate
    sets = ["train.precision=fp32", *setting["overrides"]]
    m = setting["num_negatives"]
    configs = [
        build_run_config(overrides=sets, sampler=s, num_negatives=None if s == "full" else m)
        for s in setting["samplers"]
    ]
    ws = Workspace(home)
    rows = [profile_sampler(ws, dataset, cfg, setting) for cfg in configs]
    return {"results": rows, "torch": torch.__version__, "platform": platform.platform()}


def shared_precision(metrics: dict[str, Any]) -> str | None:
    """The precision every sampler's profile ran in (fp32 unless `--set` said); None if mixed."""
    found = {row["precision"] for row in metrics["results"]}
    return found.pop() if len(found) == 1 else None


def plot(record: dict[str, Any], path: Path) -> None:
    """One stacked bar per sampler: ms per step by phase, and the step's arithmetic limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.harness import options

    rows, setup = record["metrics"]["results"], record["config"]
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.8 * len(rows)))
    labels = [f"{r['sampler']}" + (f" m={r['num_negatives']}" if r["num_negatives"] else "")
              for r in rows]  # fmt: skip
    left = [0.0] * len(rows)
    for phase in rows[0]["phases_ms"]:
        widths = [max(r["phases_ms"][phase], 0.0) for r in rows]
        ax.barh(labels, widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.scatter([r["arithmetic_limit_ms"] for r in rows], labels, marker="|", s=400, color="k",
               label="arithmetic limit (FLOPs / matmul rate)", zorder=3)  # fmt: skip
    ax.set(xlabel="ms per training step", title=f"{setup['dataset']}: one training step, "
           f"{setup['threads']} thread(s)")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    options.save_figure(fig, path)
