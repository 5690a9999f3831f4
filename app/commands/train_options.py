"""The options of `recsys train` that no other command has, each with its help."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

RETRAIN_ENV = "RECSYS_RETRAIN"
Strategy = Literal["auto", "ddp"]  # train.strategy's values (a test holds them equal)

DatasetOption = Annotated[
    str | None,
    typer.Option(
        metavar="<path|name>",
        help="Log file or folder, or a dataset name, to ingest first (once per home), or "
        "'synthetic' for a generated demo log in a home of its own.",
        show_default="the home's events; none is an error",
    ),
]
NumNegativesOption = Annotated[
    int | None,
    typer.Option(
        help="m negatives: shared by the batch, or per query with sampler.per_query; a "
        "sampler that draws must be named (--sampler), auto has none.",
        show_default="sampler.num_negatives",
    ),
]
MaxEpochsOption = Annotated[
    int | None, typer.Option(help="Upper bound on epochs.", show_default="train.max_epochs")
]
VersionOption = Annotated[
    str | None,
    typer.Option(
        metavar="<name>", help="Name of the published model version.", show_default="a timestamp"
    ),
]
DevicesOption = Annotated[
    int | None,
    typer.Option(
        help="Processes on this machine: above 1, Lightning starts one per device and "
        "trains data-parallel (gloo on CPU, nccl on GPU).",
        show_default="train.devices",
    ),
]
NumNodesOption = Annotated[
    int | None,
    typer.Option(
        help="Machines, each running --devices processes.", show_default="train.num_nodes"
    ),
]
StrategyOption = Annotated[
    Strategy | None, typer.Option(help="Lightning's strategy.", show_default="train.strategy")
]
ReusePublishedOption = Annotated[
    bool,
    typer.Option(
        "--reuse-published",
        help=f"Keep a published model and exit 0 instead of training ({RETRAIN_ENV}=1 in "
        "the environment trains anyway); what `make up` and the compose trainer run.",
    ),
]
