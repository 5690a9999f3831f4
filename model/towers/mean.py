"""`mean`: the cheap query tower, a causal running mean of the input embeddings, then a map."""

from __future__ import annotations

from torch import Tensor, nn

from model.tower_settings import MeanSettings, register_tower
from model.towers.base import QueryTowerBase, TowerShape, item_embedding, kept, unit_or_plain


@register_tower(MeanSettings)
class MeanPoolTower(QueryTowerBase):
    """Causal running mean of the input embeddings, then a linear map."""

    def __init__(self, settings: MeanSettings, shape: TowerShape) -> None:
        super().__init__()
        self.max_len = shape.max_len
        self.normalize = shape.normalize
        self.item_embedding = item_embedding(shape.num_items, shape.dim, shape.sparse)
        self.proj = nn.Linear(shape.dim, shape.dim)

    def forward(self, seq: Tensor) -> Tensor:
        """`seq [B, L]` left-padded -> `[B, L, d]`: the mapped mean of the items <= t."""
        keep = kept(seq, self.proj.weight)
        total = (self.item_embedding(seq) * keep).cumsum(dim=1)
        count = keep.cumsum(dim=1).clamp_min(1.0)
        return unit_or_plain(self.proj(total / count), self.normalize) * keep
