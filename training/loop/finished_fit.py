"""`runs/<id>/checkpoints/fit.json`: a resumable fit that finished, so that it is not fit again.

A retrain killed after its fit, before its bundle was written, is run again by the same command.
Without this record it would resume `last.ckpt` and train one epoch more: a checkpoint does not
say that early stopping or the time cap had ended the fit. The record names the best checkpoint
by file name (the home may move), the config the fit ran with (a different config fits
again) and the refit epochs a time cap left it, so that a retrain killed during its refit
refits as many again. A fit that saved no best checkpoint (no validation round) writes no
record.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from data.store import atomic_write
from training.config import RecsysConfig

log = logging.getLogger(__name__)

FILE = "fit.json"


@dataclass
class FinishedFit:
    """What a finished fit left: its best checkpoint and its timings."""

    best: Path
    seconds: float
    epoch_seconds: list[float]
    refit_epochs: int = 0  # `train.refit_epochs`, or what a time cap left of them


def _config_key(cfg: RecsysConfig) -> str:
    dump = json.dumps(cfg.model_dump(), sort_keys=True, default=str)
    return hashlib.sha256(dump.encode()).hexdigest()


def write(checkpoints: Path, cfg: RecsysConfig, done: FinishedFit) -> None:
    """Record that the fit of `cfg` in `checkpoints` finished as `done` (its best a file there)."""
    record = {
        "config": _config_key(cfg), "best": done.best.name, "seconds": done.seconds,
        "epoch_seconds": done.epoch_seconds, "refit_epochs": done.refit_epochs,
    }  # fmt: skip
    atomic_write(checkpoints / FILE, lambda tmp: tmp.write_text(json.dumps(record)))


def read(checkpoints: Path, cfg: RecsysConfig) -> FinishedFit | None:
    """The finished fit of `cfg` in `checkpoints`, or None (none, another config's, no best)."""
    path = checkpoints / FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    best = checkpoints / str(record.get("best") or "")
    if record.get("config") != _config_key(cfg) or not best.is_file():
        log.warning("%s is another config's or names no checkpoint: fitting again", path)
        return None
    log.info("%s: this run's fit had finished; its best checkpoint is used", path)
    epochs = list(record["epoch_seconds"])
    return FinishedFit(best, float(record["seconds"]), epochs, int(record.get("refit_epochs", 0)))
