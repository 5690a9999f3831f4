"""The Python API: `train` a model on a log, `load` it, and `recommend` in a few lines.

An interface like the `recsys` CLI, and as thin: `train` is what `recsys train` runs (the run
config from `training.config_loading.build_run_config`, then `training.workflows.pipeline`),
and `load` builds what `recsys serve` serves (`serving.service.ModelService` over a home, or a
`serving.recommender.Recommender` over one bundle). Nothing in the product imports it.

    import recsys

    recsys.train(events="examples/events.csv", home="my-home")
    model = recsys.load("my-home")
    for item in model.recommend(["i3", "i4"], k=3).items:
        print(item.item_id, item.score)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from data.workspace import Workspace
from model.bundle import ModelBundle
from model.bundle.layout import MANIFEST
from serving.index import IndexParams, build_index
from serving.recommender import Query, Result, ScoredItem
from serving.recommender import Recommender as _Served
from serving.service import ModelService
from training.config_loading import build_run_config

if TYPE_CHECKING:
    from training.workflows.result import TrainResult

__all__ = ["Recommender", "Result", "ScoredItem", "load", "train"]

PathLike = str | Path


def train(
    events: str | Path | None = None,
    home: PathLike | None = None,
    *,
    config: PathLike | Sequence[PathLike] | None = None,
    overrides: Sequence[str] = (),
    sampler: str | None = None,
    max_epochs: int | None = None,
    max_minutes: float | None = None,
    version: str | None = None,
) -> TrainResult | None:
    """Train a model, evaluate it on val and test, and publish it: `recsys train` in process.

    Args:
        events: A log file or folder, a dataset name, or "synthetic" (the demo log), ingested
            into the home once; None trains on the home's events (`recsys train --dataset`).
        home: The workspace folder; None: `$RECSYS_HOME`, else `./workspace` (`--home`).
        config: YAML config file(s), applied in order (`--config`).
        overrides: `section.key=value` texts, applied after the files (`--set`).
        sampler: The negative sampler, with what it pairs with (`--sampler`).
        max_epochs: Upper bound on epochs (`--max-epochs`).
        max_minutes: Wall-clock cap on training, in minutes (`--max-minutes`).
        version: The published version's name; None: a timestamp (`--version`).

    Returns:
        What the training did: `version`, `bundle` (the published folder), `metrics`
        (`val` and `test`), and the rest of `recsys train --json`; None only in the
        processes other than the first of a data-parallel training.

    Raises:
        data.errors.RecsysInputError: bad input (a config key, a log), said in one line.

    """
    from training.workflows.pipeline import train as train_pipeline

    files = [config] if isinstance(config, str | Path) else list(config or [])
    cfg = build_run_config(
        [Path(file) for file in files],
        list(overrides),
        sampler=sampler,
        max_epochs=max_epochs,
        options={"train": {"max_minutes": max_minutes}} if max_minutes is not None else None,
    )
    dataset = None if events is None else str(events)
    return train_pipeline(Workspace.resolve(home), cfg, dataset=dataset, version=version)


def load(path: PathLike | None = None, *, index: str = "auto") -> Recommender:
    """The model a home publishes (as `recsys serve` serves it), or one bundle folder.

    Args:
        path: A home: its published model, with its users' histories from its events, so
            `recommend(user=...)` knows them; or a bundle folder (`TrainResult.bundle`), which
            knows items but no users. None: `$RECSYS_HOME`, else `./workspace`.
        index: The nearest-neighbour index: auto, flat, hnsw, ivf or ivfpq (`--index`).

    Raises:
        data.errors.RecsysInputError: nothing published, or a bundle that cannot be loaded.

    """
    params = IndexParams(kind=index)
    if path is not None and (Path(path) / MANIFEST).is_file():
        bundle = ModelBundle.load(Path(path))
        items = build_index(bundle.item_embeddings, params, cache_dir=bundle.path)
        return Recommender(_Served(bundle, items))
    service = ModelService(Workspace.resolve(path), params)
    service.reload()
    assert service.current is not None  # a reload that returns has loaded a model
    return Recommender(service.current)


class Recommender:
    """A loaded model: top-k items for a history or a known user, and similar items."""

    def __init__(self, served: _Served) -> None:
        """Wrap the serving `Recommender` that `load` built."""
        self.served = served

    @property
    def version(self) -> str:
        """The model's version (its bundle folder's name)."""
        return self.served.version

    def recommend(
        self,
        items: Sequence[str] = (),
        *,
        user: str | None = None,
        k: int = 10,
        exclude_seen: bool = True,
    ) -> Result:
        """The k best next items, best first, as `GET /recommend` answers.

        Args:
            items: A history of item ids, oldest first (appended to a known user's).
            user: A user id whose stored history is used (a home's model only).
            k: How many items.
            exclude_seen: Leave the history's items out of the answer.

        Returns:
            `items` (each an `item_id`, `score` and `title`), the `strategy` ("model", or
            "popular" without a usable history) and `warnings` (unknown ids, for one).

        """
        return self.served.recommend(
            Query(user_id=user, items=tuple(items), k=k, exclude_seen=exclude_seen)
        )

    def similar(self, item_id: str, k: int = 10) -> list[ScoredItem]:
        """The k items nearest `item_id` by the model's score, itself left out.

        Raises:
            serving.recommender.UnknownItemError: the model does not know `item_id`.

        """
        return self.served.similar(item_id, k)
