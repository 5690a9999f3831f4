"""`sasrec`: causal multi-head self-attention over the last L items (Kang & McAuley 2018).

Pre-LayerNorm blocks (attention, then a position-wise feed-forward layer), learned positions
counted from the end of the window, item embeddings scaled by sqrt(d).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from model.tower_settings import SasrecSettings, register_tower
from model.towers.base import (
    FastDropout,
    QueryTowerBase,
    TowerShape,
    causal_attention_mask,
    feed_forward,
    item_embedding,
    kept,
    unit_or_plain,
)


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then a position-wise FFN."""

    def __init__(self, dim: int, num_heads: int, dropout: float, ffn_dim: int) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, dropout=dropout, batch_first=True)
        self.norm_ffn = nn.LayerNorm(dim)
        self.ffn = feed_forward(dim, ffn_dim, dropout)
        self.drop = FastDropout(dropout)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        """`x [B, L, d]`, `attn_mask [B * heads, L, L]` (True = blocked) -> `[B, L, d]`."""
        h = self.norm_attn(x)
        x = x + self.drop(self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0])
        return x + self.drop(self.ffn(self.norm_ffn(x)))


@register_tower(SasrecSettings)
class SasrecTower(QueryTowerBase):
    """SASRec-like causal self-attention over the last L items, output at every position."""

    def __init__(self, settings: SasrecSettings, shape: TowerShape) -> None:
        super().__init__()
        settings.check_sizes(shape.dim, shape.max_len)
        dim = shape.dim
        self.max_len = shape.max_len
        self.num_heads = settings.num_heads
        self.normalize = shape.normalize
        self.item_embedding = item_embedding(shape.num_items, dim, shape.sparse)
        self.pos_embedding = nn.Embedding(shape.max_len, dim)
        nn.init.normal_(self.pos_embedding.weight, std=dim**-0.5)
        self.emb_drop = FastDropout(shape.dropout)
        width = settings.ffn_width(dim)
        self.blocks = nn.ModuleList(
            _Block(dim, settings.num_heads, shape.dropout, width)
            for _ in range(settings.num_layers)
        )
        self.norm_out = nn.LayerNorm(dim)

    def forward(self, seq: Tensor) -> Tensor:
        """Encode every position.

        Args:
            seq: `[B, L]` int64 item_idx, left-padded with 0 (L <= max_len).

        Returns:
            `[B, L, d]` (L2-normalised with `normalize`; zeros at padded positions); position
            t depends only on items at positions <= t.

        """
        length = seq.shape[1]
        keep = kept(seq, self.pos_embedding.weight)
        positions = torch.arange(self.max_len - length, self.max_len, device=seq.device)
        x = self.item_embedding(seq) * self.item_embedding.embedding_dim**0.5
        x = self.emb_drop(x + self.pos_embedding(positions)) * keep
        mask = causal_attention_mask(seq == 0, self.num_heads)
        for block in self.blocks:
            x = block(x, mask) * keep
        return unit_or_plain(self.norm_out(x), self.normalize) * keep
