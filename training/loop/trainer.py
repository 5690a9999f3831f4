"""The Lightning side of a training: the Trainer and its callbacks, fit.

`fit()` is the one place a model is trained: `recsys train`, `recsys retrain` and the
benchmarks all call it. A retrain passes a warm start (the served model's weights and optimiser
state, see `training.workflows.warm_start`) and asks for a `last.ckpt` every epoch so that a
killed run resumes where it stopped (and one killed after its fit finished does not fit again).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl_lightning
import torch
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

from data.errors import RecsysInputError
from data.split import Splits, build_splits
from data.workspace import Workspace
from training import distributed
from training.config import RecsysConfig
from training.config_loading import load_stored_config
from training.loop import finished_fit, memory
from training.loop.checkpoints import (
    MONITOR,
    best_and_last,
    final_checkpoint,
    load_checkpoint,
    restore_best,
    resumable_checkpoint,
)
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.divergence import StopOnDivergence
from training.loop.final_round import ReservingTimer, capped_final_round
from training.loop.interrupt import interruptible_fit
from training.loop.lit_module import RetrievalModule
from training.loop.module_build import build_module, resolve_sampler
from training.loop.plateau import DecayBeforeStopping
from training.loop.progress import EpochProgress, EpochTimer, terminal_bar
from training.loop.stopping import SmoothedStopping
from training.loop.weight_average import WeightAverage

log = logging.getLogger(__name__)


def _trainer(
    cfg: RecsysConfig,
    run_dir: Path,
    extra: list[Callback],
    save_last: bool,
    patience: int,
    refit_epochs: int,
    **overrides: Any,
) -> pl_lightning.Trainer:
    loggers = [
        CSVLogger(run_dir.parent, name=run_dir.name, version=""),
        TensorBoardLogger(run_dir.parent, name=run_dir.name, version=""),
    ]
    kwargs: dict[str, Any] = {
        "max_epochs": cfg.train.max_epochs,
        **_validation_cadence(cfg.train.val_every, cfg.train.val_every_steps),
        **processes(cfg),
        "callbacks": [
            *best_and_last(cfg, run_dir, save_last),
            _stopping(cfg, patience, refit_epochs),
            *capped_final_round(cfg.train.max_minutes, refit_epochs),
            StopOnDivergence(),
            EpochTimer(),
            memory.MemoryBudget(),
            EpochProgress(
                overrides.get("max_epochs", cfg.train.max_epochs),
                cfg.train.max_minutes,
                cfg.train.val_every_steps,
            ),
            *terminal_bar(),
            *([WeightAverage(cfg.train.ema_decay)] if cfg.train.ema_decay is not None else []),
            *extra,
        ],
        "enable_progress_bar": sys.stderr.isatty(),
        "logger": loggers,
        "num_sanity_val_steps": 0,
        "enable_model_summary": False,
        "log_every_n_steps": 10,
    }
    kwargs.update(overrides)
    return pl_lightning.Trainer(**kwargs)


def processes(cfg: RecsysConfig) -> dict[str, Any]:
    """The `pl.Trainer` arguments that say where and in how many processes a fit runs."""
    return {
        "accelerator": cfg.train.accelerator,
        "devices": cfg.train.devices,
        "num_nodes": cfg.train.num_nodes,
        "strategy": cfg.train.strategy,
        "use_distributed_sampler": False,  # the data module gives each rank its part itself
    }


def _stopping(cfg: RecsysConfig, patience: int, refit_epochs: int) -> SmoothedStopping:
    """Early stopping, or (`lr_schedule: plateau`, no refit) the decay it starts before it stops.

    A refit after the fit ends the training, so under `plateau` it takes the decay instead
    (`training.workflows.refit`), and the fit stops at its plateau as a constant lr's does.
    """
    rule: dict[str, Any] = {"monitor": MONITOR, "mode": "max", "patience": patience}
    window = cfg.train.patience_window
    if cfg.train.lr_schedule != "plateau" or refit_epochs > 0:
        return SmoothedStopping(window=window, **rule)
    every = (cfg.train.val_every, cfg.train.val_every_steps)
    return DecayBeforeStopping(*every, window=window, **rule)


def _validation_cadence(every_epochs: int, every_steps: int | None) -> dict[str, Any]:
    """Lightning's arguments for a validation round every N epochs, or every N steps."""
    if every_steps is None:
        return {"check_val_every_n_epoch": every_epochs}
    return {"check_val_every_n_epoch": None, "val_check_interval": every_steps}


def load_run(
    run_dir: Path, checkpoint: Path | None = None
) -> tuple[RecsysConfig, Splits, RetrievalModule]:
    """A finished run `HOME/runs/NAME`: its config, its home's splits, its final module.

    The config is the run's `hparams.yaml`; the splits are rebuilt from HOME's events as the
    config defines them; the module (eval mode, CPU) holds `checkpoint`, by default the model
    the run measured on test (`checkpoints.final_checkpoint`: the refit one, or the best round).
    """
    cfg = load_stored_config(run_dir / "hparams.yaml")
    ws = Workspace(run_dir.parent.parent)
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    load_checkpoint(module, checkpoint or final_checkpoint(run_dir))
    return cfg, splits, module.eval()


@dataclass
class Fitted:
    """A finished fit: the best checkpoint's module, the data, and what the fit cost.

    `primary` is False on the ranks other than 0 of a data-parallel fit: every rank's module
    is restored to the best checkpoint (a refit trains on every rank), but nothing is measured
    or written from the others.
    """

    module: RetrievalModule
    data: SequenceDataModule
    seconds: float
    epoch_seconds: list[float]
    primary: bool = True
    refit_epochs: int = 0  # what a time cap leaves the refit (`train.refit_epochs` without one)


def fit(
    cfg: RecsysConfig,
    splits: Splits,
    run_dir: Path,
    *,
    start: Any = None,
    resumable: bool = False,
    patience: int | None = None,
    refit_epochs: int | None = None,
    **overrides: Any,
) -> Fitted:
    """Seed, build, fit and restore the best checkpoint.

    Args:
        cfg: The run's configuration (an `auto` sampler picks for the splits' catalogue).
        splits: Train / val / test sequences.
        run_dir: `runs/<run-id>`: logs and checkpoints.
        start: None (fresh weights) or a warm start with `apply(module) -> list[Callback]`
            (`training.workflows.warm_start.WarmStart`); skipped when resuming.
        resumable: Save `last.ckpt` every epoch and resume from it when it exists; a fit
            that finished is recorded and, run again, not trained again (`finished_fit`).
        patience: Early-stopping patience in validation rounds (default `cfg.train.patience`).
        refit_epochs: The refit's epochs, which a time cap leaves room for (default
            `cfg.train.refit_epochs`); the fit does not run it (`training.workflows.refit`).
        **overrides: Extra `pl.Trainer` arguments (tests: limit_train_batches...).

    Raises:
        RecsysInputError: the splits hold no training window.
        KeyboardInterrupt: Ctrl-C during the fit (`training.loop.interrupt`).

    """
    cfg = resolve_sampler(cfg, splits.num_items)
    if cfg.train.threads is not None:
        torch.set_num_threads(cfg.train.threads)
    pl_lightning.seed_everything(cfg.train.seed, workers=True, verbose=False)
    dm = SequenceDataModule.of(splits, cfg.train, cfg.model.max_len, cfg.train.val_users)
    if overrides.get("max_epochs", cfg.train.max_epochs) > 0:  # 0: a warm start kept untrained
        _require_windows(dm, cfg)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    refit = cfg.train.refit_epochs if refit_epochs is None else refit_epochs
    module.refit_owns_the_decay = cfg.train.lr_schedule == "plateau" and refit > 0
    done = finished_fit.read(run_dir / "checkpoints", cfg) if resumable else None
    if done is not None:
        load_checkpoint(module, done.best)
        return Fitted(module, dm, done.seconds, done.epoch_seconds, refit_epochs=done.refit_epochs)
    resume_from = resumable_checkpoint(run_dir) if resumable else None
    extra = start.apply(module) if start is not None and resume_from is None else []
    patience = cfg.train.patience if patience is None else patience
    trainer = _trainer(cfg, run_dir, extra, resumable, patience, refit, **overrides)
    for logger in trainer.loggers:
        logger.log_hyperparams(cfg.model_dump())
    began = time.perf_counter()
    interruptible_fit(trainer, module, datamodule=dm, ckpt_path=resume_from)
    seconds = time.perf_counter() - began
    fitted = Fitted(module, dm, seconds, [], refit_epochs=refit)
    return _finish(trainer, fitted, cfg, run_dir if resumable else None)


def _require_windows(dm: SequenceDataModule, cfg: RecsysConfig) -> None:
    """Refuse splits without a training window (nothing would train; a random model would ship).

    A shard's ranks agree on this in the data module instead (one rank cannot stop alone).

    Raises:
        RecsysInputError: no training sequence has two events.

    """
    if len(dm.train_set) > 0 or dm.splits.shard[1] > 1:
        return
    needed = "4 events (leave-one-out)" if cfg.data.split == "loo" else "3 events before the cutoff"
    raise RecsysInputError(
        "no training windows: every user's training sequence has fewer than 2 events, so "
        f"there is no next item to learn; users need at least {needed}"
    )


def _finish(
    trainer: pl_lightning.Trainer, fitted: Fitted, cfg: RecsysConfig, record_in: Path | None
) -> Fitted:
    """Timings in (with the resumed run's), best checkpoint restored, the fit recorded."""
    callbacks = trainer.callbacks  # type: ignore[attr-defined]
    timer = next(c for c in callbacks if isinstance(c, EpochTimer))
    fitted.epoch_seconds, fitted.primary = timer.seconds, trainer.is_global_zero
    cap = next((c for c in callbacks if isinstance(c, ReservingTimer)), None)
    if cap is not None:  # what the cap left the refit
        fitted.refit_epochs = cap.refit_epochs
    fitted.seconds += timer.resumed_seconds
    fitted.refit_epochs = int(distributed.from_rank_zero(fitted.refit_epochs))  # ranks agree
    fitted.module.to(trainer.strategy.root_device)  # Lightning's teardown moved it to the CPU
    best = restore_best(trainer, fitted.module)  # every rank: a refit trains on each
    if fitted.primary and record_in is not None and best is not None:
        done = finished_fit.FinishedFit(best, fitted.seconds, timer.seconds, fitted.refit_epochs)
        finished_fit.write(record_in / "checkpoints", cfg, done)
    return fitted
