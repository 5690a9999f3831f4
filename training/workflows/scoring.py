"""The metrics of a trained module or of a bundle, by full ranking over every user of a split.

`measure`: a module fresh from `fit` on val or test (`train_on`, `recsys tune`); when its data
holds one shard of the users, the other shards are read from the home one at a time.
`evaluate` (`recsys evaluate`) and `bundle_metrics`: a published bundle on the home's splits,
leaving out the rows whose target it does not know. `rows_ranks` and `bundle_row_ranks`: each
eval row's rank, for the retrain gate's paired comparison (`training.workflows.gate_evidence`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import polars as pl
import torch
from torch import Tensor

from data.errors import RecsysInputError
from data.split import TRAIN_SCHEMA, Splits, build_splits
from data.workspace import Workspace
from model import bundle
from training.config import EvalConfig, RecsysConfig
from training.config_loading import stored_config
from training.evaluation.metrics import UNRANKED, all_missed, ranking_metrics
from training.evaluation.ranking import evaluate_loader, rank_loader
from training.loop.datamodule import SequenceDataModule, SplitsLike, eval_batches
from training.loop.lit_module import RetrievalModule

VAL_TEST = ("val", "test")

log = logging.getLogger(__name__)


def measure(
    module: RetrievalModule,
    data: SequenceDataModule,
    cfg: RecsysConfig,
    split: str,
    ws: Workspace | None = None,
) -> dict[str, float]:
    """Full-ranking metrics of `module` on one split of every user.

    When `data` holds one shard of the users (`data.shard_by_rank`), the other shards are read
    from `ws`, from the same event parts, one at a time.
    """
    splits = data.splits
    loader: Iterable[dict[str, Tensor]]
    if splits.shard[1] == 1:
        rows = (splits.val if split == "val" else splits.test).height
        log.info("ranking every item for the %d %s rows", rows, split)
        loader = data.eval_dataloader(split)
    else:
        log.info("ranking every item for the %s rows of %d shards", split, splits.shard[1])
        assert ws is not None, "a shard's metrics over every user need the home"
        loader = _every_shard(ws, splits, cfg, split)
    return _module_metrics(module, loader, cfg)


def _module_metrics(
    module: RetrievalModule, loader: Iterable[dict[str, Tensor]], cfg: RecsysConfig
) -> dict[str, float]:
    """`loader`'s rows ranked by `module` against every item."""
    return evaluate_loader(
        module.model.query_tower, module.model.item_tower.all_embeddings().detach(), loader,
        module.current_temperature(), cfg, module.device, absolute=cfg.ranks_by_magnitude,
    )  # fmt: skip


def _every_shard(
    ws: Workspace, splits: SplitsLike, cfg: RecsysConfig, split: str
) -> Iterator[dict[str, Tensor]]:
    """`split`'s eval batches over every shard of the users; rows numbered across shards."""
    own, count = splits.shard
    offset = 0
    for index in range(count):
        shard: SplitsLike = splits
        if index != own:  # a sharded split has no k-core and no `since` (see `load_splits`)
            d = cfg.data
            shard = build_splits(
                ws, d.split, d.cutoff, 0, None, (index, count), splits.parts, False
            )
        frame = shard.val if split == "val" else shard.test
        for batch in eval_batches(frame, cfg.model.max_len, cfg.train.eval_batch_size):
            yield {**batch, "row": batch["row"] + offset}
        offset += frame.height


def _within_catalogue(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """Drop rows whose target the bundle does not know, and the history items it does not know.

    As serving does: the query encodes the known items. (Blanked to padding in place, a newest
    unknown item left the query all zeros, a certain miss, and held a slot of the window.)
    """
    history = pl.col("history").list.eval(pl.element().filter(pl.element() <= n))
    return frame.filter(pl.col("target") <= n).with_columns(history)


def evaluate(ws: Workspace, version: str | None = None, split: str = "test") -> dict[str, Any]:
    """Recompute full-ranking metrics from a bundle and the home's current splits.

    Rows whose target the bundle does not know (items ingested after it) are left out.

    Raises:
        RecsysInputError: bad split name, nothing published / no such version.

    """
    if split not in VAL_TEST:
        raise RecsysInputError(f"--split must be val or test, got {split!r}")
    model = bundle.ModelBundle.load(bundle.resolve_bundle(ws.models_dir, version))
    cfg = RecsysConfig.model_validate(stored_config(model.manifest.run_config()))
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    rows = splits.val if split == "val" else splits.test
    metrics, examples = bundle_metrics(model, rows)
    if not examples:
        raise RecsysInputError(
            f"no {split} rows to measure {model.version} on: the split has {rows.height} rows "
            f"(a user needs 3 events or more), none with a target the model knows"
        )
    left_out = rows.height - examples  # targets ingested after the model: it cannot know them
    result = {
        "version": model.version, "split": split, "examples": examples, "left_out": left_out,
        "metrics": metrics,
    }  # fmt: skip
    if split == "val" and model.manifest.trained_on_val:
        result["note"] = (
            f"{model.version} was refit on these validation events "
            f"({model.manifest.refit_epochs} epochs): its val metrics here are not held "
            "out; its manifest's metrics.val are its best round's"
        )
    return result


def bundle_metrics(
    model: bundle.ModelBundle, frame: pl.DataFrame, evaluation: EvalConfig | None = None
) -> tuple[dict[str, Any], int]:
    """A bundle's full-ranking metrics on the rows of an eval `frame` whose target it knows.

    Args:
        model: The bundle.
        frame: Eval rows (`Splits.val` or `Splits.test`).
        evaluation: How to rank (ks, seen items); default: the bundle's own training config's.
            Two models compared on the same rows are measured with the same one.

    Returns:
        (metrics, number of rows measured); with no such row, zero ranking metrics
        (`metrics.all_missed`) and 0.

    """
    cfg = _bundle_config(model, evaluation)
    known = _within_catalogue(frame, model.manifest.num_items)
    if not known.height:
        return all_missed(cfg.eval.ks), 0
    ranks, log_p = _bundle_ranks(model, known, cfg)
    return _floats(ranking_metrics(ranks, log_p, cfg.eval.ks)), known.height


def bundle_row_ranks(
    model: bundle.ModelBundle, frame: pl.DataFrame, evaluation: EvalConfig | None = None
) -> tuple[Tensor, Tensor]:
    """Each row's rank by the bundle, in `frame`'s order, and the known rows' log-probabilities.

    A row whose target the bundle does not know (an item ingested after it) ranks `UNRANKED`:
    a miss at every cut-off. `evaluation` as in `bundle_metrics`.
    """
    cfg = _bundle_config(model, evaluation)
    n = model.manifest.num_items
    ranks = torch.full((frame.height,), UNRANKED, dtype=torch.int64)
    known = _within_catalogue(frame, n)
    if not known.height:
        return ranks, torch.zeros(0)
    known_ranks, log_p = _bundle_ranks(model, known, cfg)
    ranks[torch.from_numpy((frame["target"] <= n).to_numpy())] = known_ranks
    return ranks, log_p


def _bundle_config(model: bundle.ModelBundle, evaluation: EvalConfig | None) -> RecsysConfig:
    """The bundle's own training config, ranked with `evaluation` when given."""
    cfg = RecsysConfig.model_validate(stored_config(model.manifest.run_config()))
    return cfg if evaluation is None else cfg.model_copy(update={"eval": evaluation})


def _bundle_ranks(
    model: bundle.ModelBundle, known: pl.DataFrame, cfg: RecsysConfig
) -> tuple[Tensor, Tensor]:
    """Ranks and log-probabilities of the `known` rows (targets within the bundle's items)."""
    log.info("ranking every item for %d rows with model %s", known.height, model.version)
    return rank_loader(
        model.query_tower, torch.from_numpy(model.item_embeddings),
        _rows_loader(known, model.manifest.num_items, cfg), model.manifest.temperature, cfg,
        absolute=model.manifest.ranks_by_magnitude,
    )  # fmt: skip


def rows_metrics(
    module: RetrievalModule, frame: pl.DataFrame, num_items: int, cfg: RecsysConfig
) -> dict[str, float]:
    """`module`'s full-ranking metrics on the eval rows `frame` (targets in its `num_items`)."""
    ranks, log_p = rows_ranks(module, frame, num_items, cfg)
    return _floats(ranking_metrics(ranks, log_p, cfg.eval.ks))


def rows_ranks(
    module: RetrievalModule, frame: pl.DataFrame, num_items: int, cfg: RecsysConfig
) -> tuple[Tensor, Tensor]:
    """`module`'s rank and log-probability of each eval row's target, in `frame`'s order.

    The retrain gate's score of its candidate's kept round, taken before a refit trains on
    those rows; ranked as `bundle_row_ranks` ranks the bundle written from the same weights.
    """
    log.info("ranking every item for the gate's %d rows", frame.height)
    return rank_loader(
        module.model.query_tower, module.model.item_tower.all_embeddings().detach(),
        _rows_loader(frame, num_items, cfg), module.current_temperature(), cfg, module.device,
        absolute=cfg.ranks_by_magnitude,
    )  # fmt: skip


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()}


def _rows_loader(frame: pl.DataFrame, num_items: int, cfg: RecsysConfig) -> Iterable[Any]:
    """Eval batches of the rows `frame`."""
    data = SequenceDataModule(
        Splits(pl.DataFrame(schema=TRAIN_SCHEMA), frame, frame, num_items),
        cfg.model.max_len, 1, cfg.train.eval_batch_size,
    )  # fmt: skip
    return data.eval_dataloader("val")
