"""The refit: after early stopping, a few more epochs on every event but each user's test one.

Early stopping needs each user's validation event held out, so the best round has never
trained on it; but it is the user's latest event before the test one, and the test history
ends with it. `train.refit_epochs` E > 0 trains the restored best round E more epochs on the
training sequences with each user's validation event appended (`with_validation_events`),
the optimiser's moments going on from the best checkpoint and the lr schedule (and a scheduled
temperature, `model.temperature_final`) from where the fit stopped, no validation round in
between (the validation rows are now training data). Under `train.ema_decay` the weight
average goes on too, from the best round's, and the refit ships the average. Under
`lr_schedule: plateau` the fit stops at its plateau without decaying and the refit decays the
lr over its own steps (`training.loop.plateau`): the decay ends the training, whichever part
ends it.
A data-parallel fit refits on every rank, each with its part of every batch, as it fitted.
The test event is never trained on. The run's val metrics are measured before the refit;
its test metrics and its bundle are the refit model's. A time cap covers the refit too: the
fit stops early enough to leave it E epochs at the fit's own pace, E cut to fit a third of
the cap (`final_round.ReservingTimer`), and the refit stops at the cap.

`recsys retrain` refits too; its gate ranks the kept round on the validation rows before the
refit trains on them (`training.workflows.gate`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytorch_lightning as pl_lightning
import torch

from data.split import TRAIN_SCHEMA, Splits
from training import distributed
from training.config import RecsysConfig
from training.loop.checkpoints import BEST_CHECKPOINT, REFIT_CHECKPOINT
from training.loop.datamodule import SequenceDataModule
from training.loop.interrupt import interruptible_fit
from training.loop.plateau import DecayOverTheRefit
from training.loop.progress import EpochProgress, EpochTimer, terminal_bar
from training.loop.trainer import processes
from training.loop.weight_average import WeightAverage
from training.workflows.warm_start import optimizer_state_loader

log = logging.getLogger(__name__)

# the fit's `pl.Trainer` arguments a refit takes too (tests: limit_train_batches)
SHARED_OVERRIDES = ("limit_train_batches", "accelerator", "devices", "num_nodes")


def with_validation_events(splits: Splits) -> Splits:
    """`splits` whose training sequences end with each user's validation target.

    A validation row's history is its user's training sequence (leave-one-out, and the time
    split's part before the cut), so the sequence becomes history + target. Users without a
    validation row keep theirs.
    """
    targets = splits.val.select("user_idx", pl.col("target").alias("_val"))
    train = splits.train.join(targets, on="user_idx", how="left").select(
        "user_idx",
        pl.when(pl.col("_val").is_null())
        .then(pl.col("items"))
        .otherwise(pl.concat_list("items", "_val"))
        .alias("items"),
    )
    return dataclasses.replace(splits, train=train.cast(TRAIN_SCHEMA))  # type: ignore[arg-type]


def refit(
    cfg: RecsysConfig, module: Any, splits: Splits, run_dir: Path, epochs: int, **overrides: Any
) -> float:
    """Train `module` (the fit's best round) `epochs` epochs on train + val.

    Args:
        cfg: The run's configuration.
        module: The `RetrievalModule` restored to the best round; trained in place.
        splits: The fit's splits (its validation events are appended to its sequences).
        run_dir: The fit's run: the best checkpoint's optimiser state is read from it.
        epochs: `train.refit_epochs`, or fewer under a time cap (`final_round.ReservingTimer`).
        **overrides: The fit's `pl.Trainer` arguments; only `SHARED_OVERRIDES` apply.

    Returns:
        The refit's wall seconds.

    """
    refit_splits = with_validation_events(splits)
    if distributed.rank_and_world()[0] == 0:  # one line, whatever the ranks
        log.info(
            "refit: %d epoch%s on the training events and %d users' validation events",
            epochs, "" if epochs == 1 else "s", splits.val.height,
        )  # fmt: skip
    data = SequenceDataModule.of(refit_splits, cfg.train, cfg.model.max_len)
    resumed = _from_the_best_round(cfg, module, run_dir)
    left = _time_left(cfg, module)
    module.clock.resumed_seconds = module.clock.seconds()  # the schedule goes on from the fit
    trainer = pl_lightning.Trainer(
        **processes(cfg),  # a data-parallel fit refits on every rank, as it fitted
        max_epochs=epochs, max_time=left, limit_val_batches=0,
        num_sanity_val_steps=0, logger=False,
        enable_checkpointing=False, enable_model_summary=False,
        enable_progress_bar=sys.stderr.isatty(),
        callbacks=[*resumed, EpochTimer(), *_progress(epochs), *_decay(module)],
        **{k: v for k, v in overrides.items() if k in SHARED_OVERRIDES},
    )  # fmt: skip
    began = time.perf_counter()
    module.train()  # measuring left it in eval mode, which Lightning keeps (dropout off)
    interruptible_fit(trainer, module, datamodule=data)
    trainer.save_checkpoint(run_dir / "checkpoints" / REFIT_CHECKPOINT)  # a retrain's start
    module.eval()
    return time.perf_counter() - began


def _time_left(cfg: RecsysConfig, module: Any) -> timedelta | None:
    """What the time cap leaves the refit (it stops there, mid-epoch if it must); no cap: None.

    The fit planned for the refit's epochs at its own pace; a refit epoch holds more events
    than a fit's, so the cap is what bounds it.
    """
    if cfg.train.max_minutes is None:
        return None
    return timedelta(seconds=max(60.0 * cfg.train.max_minutes - module.clock.seconds(), 0.0))


def _decay(module: Any) -> list[pl_lightning.Callback]:
    """The refit's lr decay, where its fit left the decay to it (`lr_schedule: plateau`)."""
    return [DecayOverTheRefit()] if module.refit_owns_the_decay else []


def _progress(epochs: int) -> list[pl_lightning.Callback]:
    """A `refit epoch k/E` line per epoch; on a terminal, a bar counting `Refit 1/E`..."""
    return [EpochProgress(epochs, None, label="refit epoch"), *terminal_bar("Refit")]


def _from_the_best_round(
    cfg: RecsysConfig, module: Any, run_dir: Path
) -> list[pl_lightning.Callback]:
    """The callbacks going on from the best checkpoint's optimiser state and weight average.

    The average only under `train.ema_decay`; the checkpoint is read once and not kept.
    Without it the optimiser and the average start fresh.
    """
    path = run_dir / "checkpoints" / BEST_CHECKPOINT
    if not path.is_file():
        log.warning("refit: %s is missing, the optimiser and any average start fresh", path)
    best = torch.load(path, map_location="cpu", weights_only=False) if path.is_file() else {}
    callbacks = optimizer_state_loader(best.get("optimizer_states"))
    if cfg.train.ema_decay is not None:
        average = WeightAverage(cfg.train.ema_decay)
        if best:
            average.continue_from(module, best)
        callbacks.append(average)
    return callbacks
