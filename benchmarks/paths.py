"""The checkout's folders the benchmarks default to: results, docs, datasets, scratch.

Product code holds no repository path; a benchmark passes these (or its options' values) in.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from data.datasets import DATASETS_ENV_VAR

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DOCS = REPO / "docs"
TEMP = Path(tempfile.gettempdir())  # the benchmarks' scratch folders (homes kept) go under it


def datasets_root() -> Path:
    """Where dataset names are found: `$RECSYS_DATASETS`, else `shared/datasets` beside the repo."""
    return Path(os.environ.get(DATASETS_ENV_VAR) or REPO.parent / "shared" / "datasets")


# `--dataset` of the studies that split one log themselves (None: `beauty_log()`)
LogToSplitOption = Annotated[
    Path | None,
    typer.Option(
        help="interactions.csv to split.",
        show_default="amazon-beauty's, under $RECSYS_DATASETS",
    ),
]


def beauty_log() -> Path:
    """amazon-beauty's `interactions.csv` under `datasets_root()`."""
    return datasets_root() / "amazon-beauty" / "interactions.csv"


def dataset_source(dataset: str) -> str:
    """What the product's `--dataset` takes for `dataset`: `synthetic`, a path, or a name's folder.

    A name with no folder under `datasets_root()` is passed on as given: the product refuses it.
    """
    named = datasets_root() / dataset
    if dataset == "synthetic" or Path(dataset).expanduser().exists() or not named.exists():
        return dataset
    return str(named)
