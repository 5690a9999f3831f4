"""Training orchestration behind `recsys train`, `recsys retrain` and the benchmarks.

`train()`: dataset into the home (once) -> splits -> `train_on` (fit, metrics on val and test,
bundle) -> publish. `recsys retrain` (`training.workflows.retrain`) runs the same `train_on` from
a warm start and publishes behind a quality gate. The metrics are `training.workflows.scoring`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import polars as pl
import torch

from data import owner
from data.datasets import check_dataset, prepare_dataset
from data.errors import RecsysInputError
from data.ingest import DEFAULT_LAYOUT, LogLayout
from data.lock import training_lock
from data.split import Splits, build_splits
from data.workspace import Workspace
from model import bundle
from training import distributed
from training.config import RecsysConfig
from training.loop.module_build import resolve_sampler
from training.loop.trainer import Fitted, fit
from training.precision import resolve_precision
from training.sampler_settings import SampledSettings
from training.workflows.export import export_bundle
from training.workflows.gate_evidence import record_kept_round
from training.workflows.refit import refit
from training.workflows.result import TrainResult
from training.workflows.scoring import VAL_TEST, measure

log = logging.getLogger(__name__)


def load_splits(
    ws: Workspace,
    cfg: RecsysConfig,
    since: int | None = None,
    shard: tuple[int, int] = (0, 1),
    parts: tuple[str, ...] | None = None,
) -> Splits:
    """The home's splits as the config defines them (of the users in `shard`).

    `parts` names the event parts to read (default: every part committed now).

    Raises:
        RecsysInputError: val or test empty (unsharded: a shard may have no examples).

    """
    if shard[1] > 1 and since is not None:
        raise RecsysInputError("--since reads part of every user's events: not with a shard")
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore, since, shard, parts)
    if shard[1] == 1 and (splits.val.height == 0 or splits.test.height == 0):
        raise RecsysInputError("no validation or test examples: users need at least 3 events")
    return splits


def data_shard(cfg: RecsysConfig) -> tuple[int, int]:
    """The users this process reads: (rank, ranks) with `data.shard_by_rank`, else everyone."""
    if not cfg.data.shard_by_rank:
        return 0, 1
    return distributed.planned_rank_and_world(cfg.train.devices, cfg.train.num_nodes)


def train(
    ws: Workspace,
    cfg: RecsysConfig,
    *,
    dataset: str | None = None,
    layout: LogLayout = DEFAULT_LAYOUT,
    version: str | None = None,
    publish: bool = True,
    **trainer_overrides: Any,
) -> TrainResult | None:
    """Train, evaluate the best checkpoint on val and test, export and publish the bundle.

    In a data-parallel training (`train.devices` or `train.num_nodes` > 1) every process runs
    this; rank 0 holds the lock, ingests, measures, writes and publishes, and returns the
    result; the other ranks train on the home's events as they find them and return None.

    Args:
        ws: The home (events, runs, models).
        cfg: The run config (`sampler.name: full` trains with the full softmax).
        dataset: See `data.datasets.prepare_dataset`.
        layout: The dataset's logs' format and column names.
        version: Bundle name (default: a new sortable name); also the run id.
        publish: Write the bundle and point `CURRENT` at it (False: metrics only).
        **trainer_overrides: Extra `pl.Trainer` arguments (tests: limit_train_batches...).

    Raises:
        HomeBusyError: another training holds the home.

    """
    secondary = distributed.launched_as_secondary()
    chosen = os.environ.get(distributed.RUN_VERSION_ENV) if secondary else None  # rank 0's
    version = version or chosen or bundle.new_version_name()
    bundle.check_version_name(version)
    if publish and (ws.models_dir / version).exists():
        raise RecsysInputError(f"model version {version!r} already exists")
    if not secondary and not ws.root.exists():  # a refused run leaves no home behind
        check_dataset(ws, dataset)  # (the lock would make it; prepare_dataset checks again)
    with contextlib.nullcontext() if secondary else training_lock(ws, "train"):
        label = "" if secondary else prepare_dataset(ws, dataset, layout)
        splits = load_splits(ws, cfg, shard=data_shard(cfg))
        result = train_on(ws, cfg, splits, version, label, export=publish, **trainer_overrides)
        if publish and result is not None:
            bundle.publish(ws.models_dir, version)
    return result


def train_on(
    ws: Workspace,
    cfg: RecsysConfig,
    splits: Splits,
    version: str,
    label: str,
    *,
    export: bool = True,
    start: Any = None,
    resumable: bool = False,
    patience: int | None = None,
    refit_epochs: int | None = None,
    retrain: bundle.RetrainOrigin | None = None,
    measured: tuple[str, ...] = VAL_TEST,
    gate_rows: pl.DataFrame | None = None,
    **trainer_overrides: Any,
) -> TrainResult | None:
    """Fit on `splits`, measure the best checkpoint on val and test, write (not publish) it.

    None on the ranks other than 0 of a data-parallel fit (see `train`).

    Args:
        ws: The home; the run is `runs/<version>`, the bundle `models/<version>`.
        cfg: The run config.
        splits: What to train and measure on.
        version: Run id and bundle name.
        label: The dataset's name for the manifest.
        export: Write the bundle (False: metrics only).
        start: A warm start for `training.loop.trainer.fit` (None: fresh weights).
        resumable: Keep `last.ckpt` and resume from it (see `fit`).
        patience: Early-stopping patience (default: `cfg.train.patience`).
        refit_epochs: The refit's epochs (default: `cfg.train.refit_epochs`).
        retrain: Where a retrain's candidate came from (its manifest's `retrain`).
        measured: The splits measured at the end (a study on validation leaves test out).
        gate_rows: Val rows the best round is also ranked on, before a refit trains on them
            (the retrain gate's): `metrics["gate"]`, and each row's rank in the run folder.
        **trainer_overrides: Extra `pl.Trainer` arguments.

    """
    run_dir = ws.runs_dir / version
    cfg = resolve_sampler(cfg, splits.num_items)  # measured and written as it trains
    refit_epochs = cfg.train.refit_epochs if refit_epochs is None else refit_epochs
    used = export or "test" in measured
    refit_epochs = _idle_refit_dropped(refit_epochs, used, trainer_overrides)
    if not distributed.launched_as_secondary():
        owner.claim(ws.run_owner_path(version))  # a killed run is left unfinished: `recsys clean`
        if cfg.train.devices * cfg.train.num_nodes > 1:  # the ranks Lightning starts copy it
            os.environ[distributed.RUN_VERSION_ENV] = version
    fitted = fit(
        cfg, splits, run_dir, start=start, resumable=resumable, patience=patience,
        refit_epochs=refit_epochs, **trainer_overrides,
    )  # fmt: skip
    val = _kept_round(fitted, cfg, ws, measured, gate_rows, run_dir) if fitted.primary else {}
    if fitted.refit_epochs:  # every rank; val is the best round's, test and the bundle the refit's
        fitted.seconds += refit(
            cfg, fitted.module, splits, run_dir, fitted.refit_epochs, **trainer_overrides
        )
    if not fitted.primary:
        return None
    rest = {s: measure(fitted.module, fitted.data, cfg, s, ws) for s in measured if s != "val"}
    metrics = {**val, **rest}
    result = _result(cfg, fitted, version, label, metrics, run_dir)
    if export:
        path = export_bundle(ws, cfg, fitted.module, splits, result, retrain)
        result.bundle = str(path)
    owner.finish(ws.run_owner_path(version))
    return result


def _kept_round(
    fitted: Fitted,
    cfg: RecsysConfig,
    ws: Workspace,
    measured: tuple[str, ...],
    gate_rows: pl.DataFrame | None,
    run_dir: Path,
) -> dict[str, dict[str, float]]:
    """The best round measured on val (and the gate's rows), before a refit trains on them."""
    val = {"val": measure(fitted.module, fitted.data, cfg, "val", ws)} if "val" in measured else {}
    if gate_rows is not None:
        splits = fitted.data.splits
        val["gate"] = record_kept_round(fitted.module, gate_rows, splits.num_items, cfg, run_dir)
    return val


def _idle_refit_dropped(epochs: int, used: bool, overrides: dict[str, Any]) -> int:
    """The refit's `epochs`, or 0 where a refit would not be used or run.

    Not used: neither test metrics nor a bundle come of the run (a study on validation). Not
    run: `max_epochs` 0 (a warm start kept untrained).
    """
    if not epochs or not used or overrides.get("max_epochs") == 0:
        return 0
    return epochs


def _result(
    cfg: RecsysConfig,
    fitted: Fitted,
    version: str,
    label: str,
    metrics: dict[str, dict[str, float]],
    run_dir: Path,
) -> TrainResult:
    epochs, sampler = len(fitted.epoch_seconds), cfg.sampler
    return TrainResult(
        version=version,
        dataset=label,
        sampler=sampler.name,
        num_negatives=sampler.num_negatives if isinstance(sampler, SampledSettings) else None,
        metrics=metrics,
        train_seconds=round(fitted.seconds, 3),
        epochs=epochs,
        seconds_per_epoch=round(sum(fitted.epoch_seconds) / max(epochs, 1), 3),
        device=str(fitted.module.device),
        threads=torch.get_num_threads(),
        precision=resolve_precision(cfg.train.precision, fitted.module.device),
        refit_epochs=fitted.refit_epochs,
        run_dir=str(run_dir),
    )
