"""`bsarec`: self-attention mixed with a frequency rescaling (BSARec).

Shin et al. 2024, "An Attentive Inductive Bias for Sequential Recommendation beyond the
Self-Attention": each block mixes two views of its input, `alpha * dsp + (1 - alpha) * gsp`:
`dsp` keeps the window's lowest `c // 2 + 1` frequencies as they are and rescales the rest
by a learned `beta^2` per channel; `gsp` is causal multi-head self-attention; each view has its
residual, dropout and LayerNorm; then a feed-forward layer (4 d wide). The low-pass is applied
causally, or over the whole window as BSARec's code does (`model.tower.window`, for models
trained at the last position only; `model/towers/filters.py`). With `model.tower.padding:
embedded`, as BSARec's code, every window is max_len wide and a padded position is not zero:
it enters as its position embedding, its attention (which has no earlier item to see) spans
the whole window, and the low-pass mixes it into the item positions.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.tower_settings import BsarecSettings, register_tower
from model.towers.base import (
    BlockTower,
    FastDropout,
    PositionalInput,
    ResidualFeedForward,
    SequenceBlock,
    TowerShape,
    causal_attention_mask,
    kept,
)
from model.towers.filters import apply_operator, low_pass_operator


class MixedBlock(SequenceBlock):
    """BSARec's block: the frequency view and attention, mixed by alpha, then the FFN."""

    def __init__(self, settings: BsarecSettings, shape: TowerShape, width: int) -> None:
        super().__init__()
        dim, dropout = shape.dim, shape.dropout
        self.alpha = settings.alpha
        self.num_heads = settings.num_heads
        self.embedded = settings.padding == "embedded"
        self.low_pass: Tensor
        low_pass = low_pass_operator(shape.max_len, settings.cutoff, settings.window == "whole")
        self.register_buffer("low_pass", low_pass, persistent=False)
        self.sqrt_beta = nn.Parameter(torch.randn(dim))
        self.attn = nn.MultiheadAttention(dim, settings.num_heads, dropout, batch_first=True)
        self.drop_dsp, self.drop_gsp = FastDropout(dropout), FastDropout(dropout)
        self.norm_dsp, self.norm_gsp = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = ResidualFeedForward(dim, width, dropout)

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        """`x [B, L, d]` (zero at padding unless embedded), `pad [B, L]` -> `[B, L, d]`."""
        mask = causal_attention_mask(pad, self.num_heads)
        if self.embedded:  # a padded row has no earlier item: BSARec's additive mask frees it
            mask = mask & ~pad.repeat_interleave(self.num_heads, dim=0).unsqueeze(-1)
        return self._mix(x, x, apply_operator(x, self.low_pass), mask)

    def last(self, x: Tensor, pad: Tensor) -> Tensor:
        """The last position alone: one attention query, one row of the low-pass, one FFN row."""
        mask = pad.unsqueeze(1).clone()  # [B, 1, L]: padded keys blocked; itself always allowed
        mask[..., -1] = False
        if self.embedded:  # an empty history's last row is padding: free, as in `forward`
            mask &= ~pad[:, -1:].unsqueeze(-1)
        mask = mask.repeat_interleave(self.num_heads, dim=0)
        return self._mix(x[:, -1:], x, apply_operator(x, self.low_pass[-1:]), mask)[:, 0]

    def _mix(self, query: Tensor, x: Tensor, low: Tensor, mask: Tensor) -> Tensor:
        """Both views at `query [B, Q, d]` (the last Q positions of `x [B, L, d]`) -> `[B, Q, d]`.

        `low [B, Q, d]`: the low-pass at those positions; `mask [B * heads, Q, L]` (True =
        blocked).
        """
        rescaled = low + self.sqrt_beta**2 * (query - low)
        dsp = self.norm_dsp(query + self.drop_dsp(rescaled))
        seen = self.attn(query, x, x, attn_mask=mask, need_weights=False)[0]
        gsp = self.norm_gsp(query + self.drop_gsp(seen))
        return self.ffn(self.alpha * dsp + (1.0 - self.alpha) * gsp)


@register_tower(BsarecSettings)
class BsarecTower(BlockTower):
    """BSARec: positions and items in, blocks of attention mixed with the frequency view."""

    def __init__(self, settings: BsarecSettings, shape: TowerShape) -> None:
        super().__init__(shape)
        settings.check_sizes(shape.dim, shape.max_len)
        width = settings.ffn_width(shape.dim)
        self.embedded = settings.padding == "embedded"
        self.inputs = PositionalInput(shape.dim, shape.max_len, shape.dropout, not self.embedded)
        self.blocks.extend(MixedBlock(settings, shape, width) for _ in range(settings.num_layers))

    def _below(self, seq: Tensor, blocks: Iterable[nn.Module]) -> tuple[Tensor, Tensor, Tensor]:
        """Embedded padding: every window `max_len` wide, its padded rows kept between blocks."""
        if not self.embedded:
            return super()._below(seq, blocks)
        seq = F.pad(seq, (self.max_len - seq.shape[1], 0))
        x = self.inputs(self.item_embedding(seq), seq)
        pad = seq == 0
        for block in blocks:
            x = block(x, pad)
        return x, pad, kept(seq, x)
