"""A trained module as a model bundle: towers, item table and a manifest of what made it.

The bundle (`model.bundle`) is what serving loads; the manifest names the event parts the model
saw, its config and metrics, and the item frame carries each item's id, training popularity
and title.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import torch

from data import vocab
from data.split import Splits
from data.workspace import Workspace
from model import bundle
from training.config import RecsysConfig
from training.loop.datamodule import item_counts
from training.loop.lit_module import RetrievalModule
from training.workflows.result import TrainResult

log = logging.getLogger(__name__)


def export_bundle(
    ws: Workspace,
    cfg: RecsysConfig,
    module: RetrievalModule,
    splits: Splits,
    res: TrainResult,
    retrain: bundle.RetrainOrigin | None,
) -> Path:
    """Write the module as bundle `res.version`; the manifest names the event parts it saw."""
    log.info("writing model bundle %s", res.version)
    model = module.model.cpu().eval()
    emb = model.item_tower.all_embeddings().detach().numpy()
    manifest = bundle.Manifest(
        version=res.version, created_at=datetime.now(UTC).replace(microsecond=0),
        dataset=res.dataset,
        events=list(splits.parts), num_items=splits.num_items, model=cfg.model.model_copy(),
        temperature=module.current_temperature(),
        score=bundle.ABS_DOT if cfg.ranks_by_magnitude else bundle.DOT,
        config=cfg.model_dump(exclude={"model"}), metrics=res.metrics,
        train_seconds=res.train_seconds, epochs=res.epochs, refit_epochs=res.refit_epochs,
        retrain=retrain,
    )  # fmt: skip
    return bundle.write_bundle(
        ws.models_dir, manifest, query_tower=model.query_tower, item_embeddings=emb,
        items=_items_frame(ws, splits),
    )  # fmt: skip


def _items_frame(ws: Workspace, splits: Splits) -> pl.DataFrame:
    counts = item_counts(splits).to(torch.int64).numpy()
    titles = vocab.load_item_titles(ws)
    items = vocab.load_item_vocab(ws).select("item_idx", "item_id").sort("item_idx")
    items = items.filter(pl.col("item_idx") <= splits.num_items)
    return items.with_columns(
        pl.Series("popularity", counts[items["item_idx"].to_numpy()], dtype=pl.Int64),
        pl.col("item_id")
        .replace_strict(titles, default=None, return_dtype=pl.String)
        .alias("title"),
    )
