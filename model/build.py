"""Build the towers a `ModelConfig` describes: what training and serving both call.

The bundle's `manifest["model"]` is a `ModelConfig`, so a served model computes its queries
with the same tower, built the same way, as the one that was trained.
"""

from __future__ import annotations

from typing import Any

from model.config import ModelConfig
from model.tower_settings import FORMER_MODEL_KEYS, tower_class
from model.towers import ItemTower, QueryTowerBase, TowerShape, TwoTowerModel
from model.towers.base import normal_init


def _model_config(model_cfg: dict[str, Any] | ModelConfig) -> ModelConfig:
    """Read a `ModelConfig` from a dict, ignoring keys this version does not know."""
    if isinstance(model_cfg, ModelConfig):
        return model_cfg
    known = {k: v for k, v in model_cfg.items() if k in ModelConfig.model_fields}
    former = {k: v for k, v in model_cfg.items() if k in FORMER_MODEL_KEYS}
    return ModelConfig(**known, **former)


def build_query_tower(
    model_cfg: dict[str, Any] | ModelConfig, num_items: int, sparse: bool = False
) -> QueryTowerBase:
    """Build the query tower a config names.

    Args:
        model_cfg: `ModelConfig` fields (tower, dim, max_len, dropout, normalize); unknown
            keys are ignored, missing ones take the defaults.
        num_items: Catalogue size n (the input table has n + 1 rows).
        sparse: Sparse gradients for the input embedding table.

    """
    cfg = _model_config(model_cfg)
    shape = TowerShape(num_items, cfg.dim, cfg.max_len, cfg.dropout, sparse, cfg.normalize)
    tower: QueryTowerBase = tower_class(cfg.tower.name)(cfg.tower, shape)
    return tower


def build_model(
    model_cfg: dict[str, Any] | ModelConfig, num_items: int, sparse: bool = False
) -> TwoTowerModel:
    """Both towers; the item tower shares the query input table if `share_embeddings`."""
    cfg = _model_config(model_cfg)
    query = build_query_tower(cfg, num_items, sparse=sparse)
    shared = query.item_embedding if cfg.share_embeddings else None
    item = ItemTower(num_items, cfg.dim, shared, sparse, cfg.normalize)
    model = TwoTowerModel(query, item)
    if cfg.init_std is not None:
        normal_init(model, cfg.init_std)
    return model
