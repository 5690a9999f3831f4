"""A tiny synthetic home for the tests that fit a model: settings, splits and logged rounds."""

import csv
from pathlib import Path

from data.ingest import ingest_files
from data.split import Splits, build_splits
from data.synth import generate_events
from data.workspace import Workspace
from training.config import TrainConfig

# a target at every position (a few steps an epoch): the default tower, bsarec, with its low-pass
# causal (over the whole window it needs one target a window); a tower named later starts afresh
EVERY_POSITION = ["train.targets=all", "model.tower=bsarec", "model.tower.window=causal"]
# a target at every position: a few steps an epoch, which the tests count; a short refit (the
# tests of the default's length read `DEFAULT_REFIT`); midx, whose state the fits carry (the
# default, auto, would train the full softmax on 40 items)
TINY = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=32",
        *EVERY_POSITION, "train.refit_epochs=2", "sampler.name=midx"]  # fmt: skip
DEFAULT_REFIT = TrainConfig().refit_epochs  # the refit's epochs where a run sets none


def flags(sets: list[str]) -> list[str]:
    """`sets` as the CLI's `--set` flags."""
    return [part for text in sets for part in ("--set", text)]


def tiny_home(root: Path, home: str = "home") -> tuple[Workspace, Splits]:
    """A small synthetic log (60 users, 40 items) ingested into `root / home`, and its splits."""
    root.mkdir(parents=True, exist_ok=True)
    log = root / "log.csv"
    generate_events(60, 40, 900, seed=3).write_csv(log)
    ws = Workspace(root / home)
    ingest_files(ws, [log])
    return ws, build_splits(ws)


def validation_rounds(run: Path) -> list[dict[str, str]]:
    """The rows of a run's metrics.csv that log a validation round, in order."""
    with (run / "metrics.csv").open() as rows:
        return [row for row in csv.DictReader(rows) if row["val/ndcg@10"]]
