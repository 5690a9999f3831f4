"""A fit's checkpoints: `best.ckpt` (by val NDCG@10) and `last.ckpt`, loading, restoring, resuming.

`training.loop.trainer.fit` asks for the callbacks, restores the best checkpoint when the fit ends,
and resumes a killed resumable fit from `last.ckpt`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytorch_lightning as pl_lightning
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from training.config import RecsysConfig
from training.loop.lit_module import RetrievalModule

log = logging.getLogger(__name__)

MONITOR = "val/ndcg@10"
BEST_CHECKPOINT = "best.ckpt"
# the best round refit on the val events too (training/workflows/refit.py)
REFIT_CHECKPOINT = "refit.ckpt"
LAST_CHECKPOINT = "last.ckpt"


def best_and_last(cfg: RecsysConfig, run_dir: Path, save_last: bool) -> list[ModelCheckpoint]:
    """`best.ckpt` (by val NDCG@10) and, for a resumable fit, `last.ckpt`."""
    # no version counter: a fit started afresh over a killed one's folder replaces its
    # best.ckpt instead of writing best-v1.ckpt beside it (a warm start reads best.ckpt)
    best = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename=Path(BEST_CHECKPOINT).stem, monitor=MONITOR,
        mode="max", enable_version_counter=False,
    )  # fmt: skip
    # Lightning's save_last writes last.ckpt only when `best` saves (val improved): a second
    # checkpoint without a monitor keeps the latest epoch, so a resume loses at most one; with
    # rounds every N steps it keeps the latest round instead (an epoch may outlast the budget;
    # Lightning resumes such a checkpoint mid-epoch, its loader going on after the batches the
    # checkpoint had trained: `datamodule.TrainLoader`)
    last = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename=Path(LAST_CHECKPOINT).stem, monitor=None,
        save_top_k=1, enable_version_counter=False,
        save_on_train_epoch_end=cfg.train.val_every_steps is None,
    )  # fmt: skip
    return [best, last] if save_last else [best]


def final_checkpoint(run_dir: Path) -> Path:
    """The checkpoint of the model a run measured on test and exported.

    `refit.ckpt` when the run refit its best round (`train.refit_epochs`), else `best.ckpt`.
    """
    folder = run_dir / "checkpoints"
    refit = folder / REFIT_CHECKPOINT
    return refit if refit.is_file() else folder / BEST_CHECKPOINT


def load_checkpoint(module: RetrievalModule, path: Path | str) -> dict[str, Any]:
    """Load a Lightning checkpoint's weights into `module` (on its device); the checkpoint."""
    state: dict[str, Any] = torch.load(path, map_location=module.device, weights_only=False)
    module.load_state_dict(state["state_dict"])
    module.restore_temperature(state)
    return state


def restore_best(trainer: pl_lightning.Trainer, module: RetrievalModule) -> Path | None:
    """Load the best checkpoint into `module`; its path (None when none was saved)."""
    callbacks = trainer.callbacks  # type: ignore[attr-defined]
    ckpt = next(c for c in callbacks if isinstance(c, ModelCheckpoint) and c.monitor == MONITOR)
    if not ckpt.best_model_path:
        return None
    state = load_checkpoint(module, ckpt.best_model_path)
    score = float(ckpt.best_model_score) if ckpt.best_model_score is not None else float("nan")
    log.info(
        "the best validation round is the model: epoch %d (step %d), %s %.4f",
        state["epoch"] + 1, state["global_step"], MONITOR, score,
    )  # fmt: skip
    return Path(ckpt.best_model_path)


def resumable_checkpoint(run_dir: Path) -> Path | None:
    """`last.ckpt` of a killed run if it loads; one cut short by the kill is removed."""
    last = run_dir / "checkpoints" / LAST_CHECKPOINT
    if not last.is_file():
        return None
    try:
        torch.load(last, map_location="cpu", weights_only=False)
    except Exception as err:  # torch raises many types for a truncated file
        log.warning("%s is unreadable (%s): training this run from its start", last, err)
        last.unlink()
        return None
    log.info("resuming from %s", last)
    return last
