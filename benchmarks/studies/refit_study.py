"""How many refit epochs (`train.refit_epochs`), on validation only: every split one event back.

Usage: python -m benchmarks.studies.refit_study [--out DIR] [--minutes M] [--epochs K]
       [--arms ARM]... DATASET...

The refit trains on each user's validation event, so validation cannot judge it. This study
moves every split back by one event and never reads the test split: each user's last
training event becomes the validation target (early stopping), and the real validation event
becomes the "test" target. Per dataset (the record `DIR/<dataset>.json`, skipped when it exists):
1. fit the full softmax on the shifted splits, `--minutes` cap, with the default model its
   committed records trained (`RECORDED`: d = 64, the causal low-pass, lr 5e-4, no weight
   decay or weight average; the arms train the kept round's weights, which a weight average
   would not ship);
2. `with_val`: from that best round (weights and Adam moments of `best.ckpt`), K epochs on the
   shifted training sequences plus the shifted validation events, the shifted "test" (the real
   validation rows) ranked after each epoch;
3. `train_only`: the same K epochs on the shifted training sequences alone (the control: are
   the gains the extra epochs', or the added events'?);
4. `with_val_decay` (`--arms`): `with_val` with the lr decaying to `train.min_lr_ratio` over
   the K epochs (a cosine, as a refit decays under `lr_schedule: plateau`).
`--arms` picks which of 2-4 run (default: `with_val` and `train_only`), each from the same base.
Threads: torch's default (every core, or OMP_NUM_THREADS); the committed runs ran two at a
time with OMP_NUM_THREADS=1 each, which the record holds (torch threads, load averages).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import torch
import typer
from pytorch_lightning.callbacks import Callback

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP, datasets_root
from benchmarks.sweeps.sweep_grid import FORMER_TRAINING
from benchmarks.sweeps.tower_grid import FORMER_DEFAULT_SETTING, as_shipped
from data.datasets import prepare_dataset
from data.split import Splits
from data.workspace import Workspace
from training.config_loading import load_config
from training.loop.checkpoints import BEST_CHECKPOINT
from training.loop.trainer import fit
from training.workflows.pipeline import load_splits
from training.workflows.refit import with_validation_events
from training.workflows.scoring import measure
from training.workflows.warm_start import WarmStart


def shifted(splits: Splits) -> Splits:
    """Every split one event back: train[:-1], val (train[:-1], train[-1]), test = real val."""
    n = pl.col("items").list.len()
    users = splits.train.filter(n >= 2).join(splits.val.select("user_idx"), on="user_idx")
    val = users.select(
        "user_idx",
        pl.col("items").list.slice(0, n - 1).alias("history"),
        pl.col("items").list.last().alias("target"),
    ).cast(dict(splits.val.schema))  # type: ignore[arg-type]
    ids = val["user_idx"].implode()
    train = splits.train.select(
        "user_idx",
        pl.when(pl.col("user_idx").is_in(ids))
        .then(pl.col("items").list.slice(0, n - 1))
        .otherwise(pl.col("items"))
        .alias("items"),
    )
    test = splits.val.join(val.select("user_idx"), on="user_idx")
    return dataclasses.replace(splits, train=train, val=val, test=test)


class _RankEachEpoch(Callback):
    """The shifted test rows' NDCG@10 and Recall@10 after each training epoch."""

    def __init__(self, data: Any, cfg: Any) -> None:
        self.data, self.cfg = data, cfg
        self.rows: list[dict[str, float]] = []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        module.eval()
        with torch.no_grad():
            scores = measure(module, self.data, self.cfg, "test")
        module.train()
        self.rows.append(_at_10(scores))


def _at_10(scores: dict[str, float]) -> dict[str, float]:
    return {k: scores[k] for k in ("ndcg@10", "recall@10")}


def continue_from_best(
    cfg: Any, splits: Splits, base: Any, run: Path, epochs: int, arm: str
) -> list[dict]:
    """`epochs` more epochs from the base run's best round on `splits.train`; test each epoch."""
    ckpt = torch.load(run / "checkpoints" / BEST_CHECKPOINT, map_location="cpu", weights_only=False)
    empty = (torch.zeros(0, cfg.model.max_len, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    start = WarmStart(
        ckpt["state_dict"], ckpt["optimizer_states"], splits.num_items, "random", empty
    )
    ranker = _RankEachEpoch(base.data, cfg)
    apply = start.apply
    start.apply = lambda module: [*apply(module), ranker]  # type: ignore[method-assign]
    fit(cfg, splits, run.parent / arm, start=start, max_epochs=epochs)
    return ranker.rows


# arm: (it trains on the validation events, its lr schedule over its epochs)
ARMS = {
    "with_val": (True, "constant"),
    "train_only": (False, "constant"),
    "with_val_decay": (True, "cosine"),  # the curve of `plateau`'s refit: lr to its floor
}
DEFAULT_ARMS = ("with_val", "train_only")
# the default model when the committed records ran (before the query-tower study's chosen one)
RECORDED = (*as_shipped(FORMER_DEFAULT_SETTING), *FORMER_TRAINING)


def study(
    dataset: str, data_root: Path, home: Path, minutes: float, epochs: int, arms: list[str]
) -> dict:
    """The base fit, then each of `arms` from its best round (see the module docstring)."""
    ws = Workspace(home)
    prepare_dataset(ws, str(data_root / dataset / "interactions.csv"))
    cfg = load_config(overrides=[*RECORDED, "sampler.name=full", f"train.max_minutes={minutes}"])
    splits = shifted(load_splits(ws, cfg))
    base = fit(cfg, splits, home / "runs" / "base")
    record: dict[str, Any] = {
        "base_epochs": len(base.epoch_seconds),
        "base_val_ndcg@10": measure(base.module, base.data, cfg, "val")["ndcg@10"],
        "base_test": _at_10(measure(base.module, base.data, cfg, "test")),
    }  # fmt: skip
    run = home / "runs" / "base"
    for arm in arms:
        with_val, schedule = ARMS[arm]
        free = load_config(overrides=[
            *RECORDED, "sampler.name=full", "train.refit_epochs=0", f"train.lr_schedule={schedule}",
            "train.max_minutes=null",  # a cosine over the arm's epochs, not over a time cap
        ])  # fmt: skip
        trained = with_validation_events(splits) if with_val else splits
        record[arm] = continue_from_best(free, trained, base, run, epochs, arm)
    return record


def main(
    datasets: Annotated[list[str], typer.Argument(help="Dataset names under --data-root.")],
    out: Annotated[Path, typer.Option()] = RESULTS / "refit_study",
    data_root: Annotated[
        Path | None, typer.Option(help="Datasets folder.", show_default="$RECSYS_DATASETS")
    ] = None,
    work: Annotated[Path, typer.Option("--scratch")] = TEMP / "refit-study",
    minutes: Annotated[float, typer.Option(help="The base fit's cap.")] = 10.0,
    epochs: Annotated[int, typer.Option(help="Refit (and control) epochs.")] = 8,
    arms: Annotated[
        list[str] | None, typer.Option("--arms", help=f"Arms to run, of {', '.join(ARMS)}.")
    ] = None,
) -> None:
    """Run the study for each dataset without a record."""
    chosen = list(arms or DEFAULT_ARMS)
    if unknown := sorted(set(chosen) - set(ARMS)):
        raise typer.BadParameter(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    for dataset in datasets:
        path = out / f"{dataset}.json"
        if not path.exists():
            started = records.start()
            setting = {"dataset": dataset, "minutes": minutes, "epochs": epochs, "arms": chosen}
            root = data_root or datasets_root()
            found = study(dataset, root, work / dataset, minutes, epochs, chosen)
            records.save(path, setting, found, started, threads=torch.get_num_threads())


if __name__ == "__main__":
    typer.run(main)
