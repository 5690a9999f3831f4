"""A served tiny model and new logs for the retrain tests: settings, logs, train, retrain."""

from pathlib import Path

import polars as pl

from data.synth import generate_events
from data.workspace import Workspace
from tests.training.tiny import EVERY_POSITION
from training.config_loading import load_config
from training.workflows.gate import RetrainResult
from training.workflows.pipeline import train
from training.workflows.retrain import RetrainRequest, retrain, served_config

TINY = [
    "model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
    "sampler.name=midx", "sampler.num_negatives=32", "train.max_epochs=3", "eval.ks=[10,20]",
    "model.normalize=true", "model.temperature=0.1",  # unit rows: the tests compare norms,
    *EVERY_POSITION,  # a target at every position: a few steps an epoch
    "train.refit_epochs=2", "retrain.refit_epochs=2",  # short refits: tests of one set theirs
]  # fmt: skip


def write_logs(folder: Path) -> tuple[Path, Path]:
    """An old log, and a new one with later events, 15 new items and some new users."""
    events = generate_events(200, 120, 3000, seed=2)
    first_seen = events.group_by("item_id").agg(pl.col("timestamp").min()).sort("timestamp")
    late = first_seen.tail(15)["item_id"].implode()
    cut = events["timestamp"].quantile(0.8)
    old = events.filter((pl.col("timestamp") < cut) & ~pl.col("item_id").is_in(late))
    new = events.join(old, on=["user_id", "item_id", "timestamp"], how="anti")
    old.write_csv(folder / "old.csv")
    new.write_csv(folder / "new.csv")
    return folder / "old.csv", folder / "new.csv"


def serve_v1(ws: Workspace, old: Path) -> None:
    """Train on `old` and publish it as v1."""
    train(ws, load_config(overrides=TINY), dataset=str(old), version="v1")


def retrain_on(ws: Workspace, new: Path, *sets: str, **flags: object) -> RetrainResult:
    """`recsys retrain --logs new` with `--set` items `sets` and request `flags`."""
    cfg = load_config(overrides=list(sets), base=served_config(ws.models_dir))
    return retrain(ws, cfg, RetrainRequest([new], **flags))  # type: ignore[arg-type]
