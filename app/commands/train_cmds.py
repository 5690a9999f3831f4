"""`recsys train`, `recsys retrain` and `recsys evaluate`: thin wrappers over `training`.

The run config comes from `training.config_loading.build_run_config`: defaults < the sampler
`--sampler` names (its own defaults, and the loss it pairs with) < each `--config FILE` < each
`--set k=v` < the explicit flags (`--num-negatives`, ...).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Annotated, Literal

import typer

from app.cli_common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    MaxMinutesOption,
    SamplerOption,
    SetOption,
    emit_json,
    workspace,
)
from app.commands.data_cmds import FormatOption, ItemColOption, TimeColOption, UserColOption
from app.commands.retrain_cmd import retrain_command
from app.commands.train_options import (
    RETRAIN_ENV,
    DatasetOption,
    DevicesOption,
    MaxEpochsOption,
    NumNegativesOption,
    NumNodesOption,
    ReusePublishedOption,
    StrategyOption,
    VersionOption,
)
from data.datasets import check_dataset
from data.ingest import LogLayout
from data.workspace import Workspace
from training.config_loading import build_run_config

log = logging.getLogger("recsys.train")


def train_command(
    home: HomeOption = None,
    dataset: DatasetOption = None,
    fmt: FormatOption = None,
    user_col: UserColOption = "user_id",
    item_col: ItemColOption = "item_id",
    time_col: TimeColOption = "timestamp",
    sampler: SamplerOption = None,
    num_negatives: NumNegativesOption = None,
    max_epochs: MaxEpochsOption = None,
    max_minutes: MaxMinutesOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
    version: VersionOption = None,
    devices: DevicesOption = None,
    num_nodes: NumNodesOption = None,
    strategy: StrategyOption = None,
    reuse_published: ReusePublishedOption = False,
    json_out: JsonOption = False,
) -> None:
    """Train a model, evaluate it on val and test, export and publish the bundle."""
    train_keys: dict[str, object] = {"devices": devices, "num_nodes": num_nodes}
    train_keys |= {"strategy": strategy, "max_minutes": max_minutes}
    cfg = build_run_config(
        config or [],
        set_ or [],
        sampler=sampler,
        num_negatives=num_negatives,
        max_epochs=max_epochs,
        options={"train": {key: value for key, value in train_keys.items() if value is not None}},
    )
    ws = workspace(home)
    if reuse_published and _reusable(ws, json_out):
        return
    from training import distributed

    if not distributed.launched_as_secondary():  # the other ranks take the home as they find it
        check_dataset(ws, dataset)  # no events, or no such logs: said before Lightning's import
    from training.workflows.pipeline import train

    with contextlib.redirect_stdout(sys.stderr):  # stdout holds the result only: bars, prints
        layout = LogLayout(fmt, user_col, item_col, time_col)
        result = train(ws, cfg, dataset=dataset, layout=layout, version=version)
    if result is None:  # a rank other than 0 of a data-parallel training: rank 0 reports
        return
    payload = result.to_json()
    if json_out:
        emit_json(payload)
        return
    test = payload["metrics"]["test"]
    typer.echo(
        f"model {result.version} published ({result.dataset}, sampler {result.sampler}, "
        f"{result.epochs} epoch{'' if result.epochs == 1 else 's'}{_refit(result.refit_epochs)}, "
        f"{result.train_seconds:.0f} s): test recall@10 "
        f"{test['recall@10']:.4f}, ndcg@10 {test['ndcg@10']:.4f}, full CE {test['full_ce']:.3f}"
    )


def _refit(epochs: int) -> str:
    return f" + {epochs} refit" if epochs else ""


def _reusable(ws: Workspace, json_out: bool) -> bool:
    """Say so and return True when a published model is kept (see --reuse-published)."""
    from model.bundle import broken_reason, current_version

    version = current_version(ws.models_dir)
    if version is None or os.environ.get(RETRAIN_ENV) == "1":
        return False
    broken = broken_reason(ws.models_dir / version)
    if broken is not None:
        log.warning("CURRENT names %s, which cannot be served (%s): training", version, broken)
        return False
    if json_out:
        emit_json({"version": version, "reused": True})
    else:
        typer.echo(f"model {version} is published already: reusing it ({RETRAIN_ENV}=1 retrains)")
    return True


def evaluate_command(
    home: HomeOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", metavar="<version>", help="Bundle version.", show_default="models/CURRENT"
        ),
    ] = None,
    split: Annotated[Literal["val", "test"], typer.Option(help="The split scored.")] = "test",
    json_out: JsonOption = False,
) -> None:
    """Recompute full-ranking metrics of a bundle on the home's split."""
    from training.workflows.scoring import evaluate

    result = evaluate(workspace(home), model, split)
    if json_out:
        emit_json(result)
        return
    n = result["left_out"]
    left_out = f"; {n} left out: their target is newer than the model" if n else ""
    typer.echo(f"model {result['version']}, {split} ({result['examples']} users{left_out}):")
    for name, value in result["metrics"].items():
        typer.echo(f"  {name:<12} {value:.4f}")
    if "note" in result:
        typer.echo(f"note: {result['note']}")


def register(app: typer.Typer) -> None:
    """Attach `train`, `retrain` and `evaluate`."""
    app.command("train")(train_command)
    app.command("retrain")(retrain_command)
    app.command("evaluate")(evaluate_command)
