"""The two towers as plain `nn.Module`s: query towers (SASRec-like, mean-pool), item tower.

Sequences are LEFT-padded with item_idx 0 (most recent item last), so the last position is
always the newest item and learned positions count from the end of the window. Every tower
outputs L2-normalised vectors (`model.normalize`, the default; without it plain vectors, whose
dot products are SASRec's logits); the logit of a (query, item) pair is `h . c / temperature`.

The query tower owns its input embedding table. When `share_embeddings` is set the item tower
reuses that same `nn.Embedding` object, so the query tower's `state_dict` stays self-contained
(the bundle ships it alone) while training updates one table.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.config import ModelConfig


def _model_config(model_cfg: dict[str, Any] | ModelConfig) -> ModelConfig:
    """Read a `ModelConfig` from a dict, ignoring keys this version does not know."""
    if isinstance(model_cfg, ModelConfig):
        return model_cfg
    known = {k: v for k, v in model_cfg.items() if k in ModelConfig.model_fields}
    return ModelConfig(**known)


def _unit_or_plain(x: Tensor, normalize: bool) -> Tensor:
    """`x [*, d]` L2-normalised along d when `normalize`, else as it is."""
    return F.normalize(x, dim=-1) if normalize else x


def _item_embedding(num_items: int, dim: int, sparse: bool) -> nn.Embedding:
    table = nn.Embedding(num_items + 1, dim, padding_idx=0, sparse=sparse)
    nn.init.normal_(table.weight, std=dim**-0.5)
    with torch.no_grad():
        table.weight[0].zero_()
    return table


class _QueryTowerBase(nn.Module):
    """Shared inference API of the query towers."""

    item_embedding: nn.Embedding
    max_len: int
    normalize: bool

    def forward(self, seq: Tensor) -> Tensor:
        """Encode every position: `seq [B, L]` item_idx -> `[B, L, d]` (pad positions zero)."""
        raise NotImplementedError

    def encode(self, history: Tensor) -> Tensor:
        """Query vector for the next item after each history.

        Args:
            history: `[B, L]` int64 item_idx, left-padded with 0, most recent item last.
                Longer histories are cut to their last `max_len` items; any width up to
                `max_len` works (padding in front changes nothing).

        Returns:
            `[B, d]` output of the last position (L2-normalised with `normalize`).

        """
        history = _fit_left(history, self.max_len)
        return self.forward(history)[:, -1]


def _fit_left(seq: Tensor, length: int) -> Tensor:
    """Keep the last `length` columns: `[B, *] -> [B, <= L]` (at least one column).

    Shorter input is left as it is: positions count from the end, so left padding changes
    nothing but the cost.
    """
    if seq.shape[1] == 0:
        return F.pad(seq, (1, 0), value=0)
    return seq[:, max(seq.shape[1] - length, 0) :]


class FastDropout(nn.Module):
    """Inverted dropout, the same distribution as `nn.Dropout`, with a uniform-noise mask.

    On CPU, `nn.Dropout`'s `bernoulli_` mask is the slow part: on a `[128, 50, 256]` tensor
    (one thread) `nn.Dropout` takes 24 ms, this 14 ms; a SASRec step at d = 256 runs seven.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        """Zero each element with probability p and scale the rest by 1 / (1 - p) (training)."""
        if not self.training or self.p == 0.0:
            return x
        keep = torch.rand_like(x) >= self.p
        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then a position-wise FFN."""

    def __init__(self, dim: int, num_heads: int, dropout: float, ffn_dim: int) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, dropout=dropout, batch_first=True)
        self.norm_ffn = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(
            nn.Linear(dim, ffn_dim), nn.GELU(), FastDropout(dropout), nn.Linear(ffn_dim, dim)
        )
        self.drop = FastDropout(dropout)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        """`x [B, L, d]`, `attn_mask [B * heads, L, L]` (True = blocked) -> `[B, L, d]`."""
        h = self.norm_attn(x)
        x = x + self.drop(self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0])
        return x + self.drop(self.ffn(self.norm_ffn(x)))


class QueryTower(_QueryTowerBase):
    """SASRec-like causal self-attention over the last L items, output at every position."""

    def __init__(
        self,
        num_items: int,
        dim: int,
        max_len: int,
        num_layers: int = 2,
        num_heads: int = 1,
        dropout: float = 0.3,
        sparse: bool = False,
        normalize: bool = True,
        ffn_dim: int | None = None,
    ) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} must be divisible by num_heads {num_heads}")
        self.max_len = max_len
        self.num_heads = num_heads
        self.normalize = normalize
        self.item_embedding = _item_embedding(num_items, dim, sparse)
        self.pos_embedding = nn.Embedding(max_len, dim)
        nn.init.normal_(self.pos_embedding.weight, std=dim**-0.5)
        self.emb_drop = FastDropout(dropout)
        width = ffn_dim or dim
        self.blocks = nn.ModuleList(
            _Block(dim, num_heads, dropout, width) for _ in range(num_layers)
        )
        self.norm_out = nn.LayerNorm(dim)

    def _attn_mask(self, pad: Tensor) -> Tensor:
        """Block future keys and padded keys; `pad [B, L]` -> `[B * heads, L, L]`.

        A padded query row would have no allowed key (softmax of nothing is NaN), so every
        position may always attend to itself; padded outputs are ignored downstream.
        """
        length = pad.shape[1]
        future = torch.ones(length, length, dtype=torch.bool, device=pad.device).triu(1)
        mask = future.unsqueeze(0) | pad.unsqueeze(1)
        eye = torch.eye(length, dtype=torch.bool, device=pad.device)
        mask = mask & ~eye
        return mask.repeat_interleave(self.num_heads, dim=0)

    def forward(self, seq: Tensor) -> Tensor:
        """Encode every position.

        Args:
            seq: `[B, L]` int64 item_idx, left-padded with 0 (L <= max_len).

        Returns:
            `[B, L, d]` (L2-normalised with `normalize`; zeros at padded positions); position
            t depends only on items at positions <= t.

        """
        length = seq.shape[1]
        pad = seq == 0
        keep = (~pad).unsqueeze(-1).to(self.pos_embedding.weight.dtype)
        positions = torch.arange(self.max_len - length, self.max_len, device=seq.device)
        x = self.item_embedding(seq) * self.item_embedding.embedding_dim**0.5
        x = self.emb_drop(x + self.pos_embedding(positions)) * keep
        mask = self._attn_mask(pad)
        for block in self.blocks:
            x = block(x, mask) * keep
        return _unit_or_plain(self.norm_out(x), self.normalize) * keep


class MeanPoolTower(_QueryTowerBase):
    """Cheap query tower: causal running mean of the input embeddings, then a linear map."""

    def __init__(
        self, num_items: int, dim: int, max_len: int, sparse: bool = False, normalize: bool = True
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.normalize = normalize
        self.item_embedding = _item_embedding(num_items, dim, sparse)
        self.proj = nn.Linear(dim, dim)

    def forward(self, seq: Tensor) -> Tensor:
        """`seq [B, L]` left-padded -> `[B, L, d]`: the mapped mean of the items <= t."""
        keep = (seq != 0).unsqueeze(-1).to(self.proj.weight.dtype)
        total = (self.item_embedding(seq) * keep).cumsum(dim=1)
        count = keep.cumsum(dim=1).clamp_min(1.0)
        return _unit_or_plain(self.proj(total / count), self.normalize) * keep


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
            embedding if embedding is not None else _item_embedding(num_items, dim, sparse)
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
        return _unit_or_plain(self.embedding(distinct), self.normalize), inverse

    def all_embeddings(self) -> Tensor:
        """The whole table as `forward` gives it: `[n + 1, d]`, row 0 zeros."""
        table = _unit_or_plain(self.embedding.weight, self.normalize)
        return torch.cat([torch.zeros_like(table[:1]), table[1:]])


class TwoTowerModel(nn.Module):
    """The query tower and the item tower of one retrieval model."""

    def __init__(self, query_tower: _QueryTowerBase, item_tower: ItemTower) -> None:
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


def build_query_tower(
    model_cfg: dict[str, Any] | ModelConfig, num_items: int, sparse: bool = False
) -> _QueryTowerBase:
    """Build the query tower a config names (the bundle's `manifest["model"]` is this dict).

    Args:
        model_cfg: `ModelConfig` fields (tower, dim, max_len, num_layers, num_heads, ffn_dim,
            dropout, normalize); unknown keys are ignored, missing ones take the defaults.
        num_items: Catalogue size n (the input table has n + 1 rows).
        sparse: Sparse gradients for the input embedding table.

    """
    cfg = _model_config(model_cfg)
    if cfg.tower == "mean":
        return MeanPoolTower(num_items, cfg.dim, cfg.max_len, sparse, cfg.normalize)
    return QueryTower(
        num_items, cfg.dim, cfg.max_len, cfg.num_layers, cfg.num_heads, cfg.dropout, sparse,
        cfg.normalize, cfg.ffn_dim,
    )  # fmt: skip


def build_model(
    model_cfg: dict[str, Any] | ModelConfig, num_items: int, sparse: bool = False
) -> TwoTowerModel:
    """Both towers; the item tower shares the query input table if `share_embeddings`."""
    cfg = _model_config(model_cfg)
    query = build_query_tower(cfg, num_items, sparse=sparse)
    shared = query.item_embedding if cfg.share_embeddings else None
    item = ItemTower(num_items, cfg.dim, shared, sparse, cfg.normalize)
    return TwoTowerModel(query, item)
