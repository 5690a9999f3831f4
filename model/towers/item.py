"""The item tower and the two-tower model that pairs it with a query tower.

When `share_embeddings` is set the item tower reuses the query tower's input `nn.Embedding`
object, so the query tower's `state_dict` stays self-contained (the bundle ships it alone)
while training updates one table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.towers.base import QueryTowerBase, item_embedding, unit_or_plain


class ItemTower(nn.Module):
    """Item id embedding `[n + 1, d]` (row 0 is padding), L2-normalised (`normalize`) or not."""

    def __init__(
        self,
        num_items: int,
        dim: int,
        embedding: nn.Embedding | None = None,
        sparse: bool = False,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        self.embedding = (
            embedding if embedding is not None else item_embedding(num_items, dim, sparse)
        )
        self.normalize = normalize

    def forward(self, item_idx: Tensor) -> Tensor:
        """`item_idx [*]` -> `[*, d]` (padding rows come out as zeros)."""
        rows, inverse = self.distinct(item_idx)
        return F.embedding(inverse, rows)

    def distinct(self, item_idx: Tensor) -> tuple[Tensor, Tensor]:
        """`item_idx [*]` -> (`[k, d]` rows of its k distinct ids, `[*]` each id's row number).

        Each distinct id is looked up and normalised once (per-query negatives repeat ids).
        """
        distinct, inverse = torch.unique(item_idx, return_inverse=True)
        return unit_or_plain(self.embedding(distinct), self.normalize), inverse

    def all_embeddings(self) -> Tensor:
        """The whole table as `forward` gives it: `[n + 1, d]`, row 0 zeros."""
        table = unit_or_plain(self.embedding.weight, self.normalize)
        return torch.cat([torch.zeros_like(table[:1]), table[1:]])


class TwoTowerModel(nn.Module):
    """The query tower and the item tower of one retrieval model."""

    def __init__(self, query_tower: QueryTowerBase, item_tower: ItemTower) -> None:
        super().__init__()
        self.query_tower = query_tower
        self.item_tower = item_tower

    @property
    def item_embedding_weight(self) -> Tensor:
        """The raw (unnormalised) item tower table `[n + 1, d]`."""
        return self.item_tower.embedding.weight

    def embedding_parameters(self) -> list[Tensor]:
        """Parameters of the id tables (the sparse-optimiser group), without duplicates."""
        tables: dict[int, Tensor] = {
            id(self.item_tower.embedding.weight): self.item_tower.embedding.weight
        }
        tables[id(self.query_tower.item_embedding.weight)] = self.query_tower.item_embedding.weight
        return list(tables.values())

    def dense_parameters(self) -> list[Tensor]:
        """Every parameter that is not an id table."""
        skip = {id(p) for p in self.embedding_parameters()}
        return [p for p in self.parameters() if id(p) not in skip]
