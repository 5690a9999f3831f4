"""`fmlp`: learnable filters in the frequency domain instead of attention (FMLP-Rec).

Zhou et al. 2022, "Filter-enhanced MLP is All You Need for Sequential Recommendation": each
block multiplies the rfft of the window by a learnable complex response per frequency and
channel, takes it back to time, adds it to its input (dropout, LayerNorm), then a feed-forward
layer (4 d wide). Here the filter is applied causally (`model/towers/filters.py`): position t
gets what the published filter gives the last position of the window ending at t.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from model.tower_settings import FmlpSettings, register_tower
from model.towers.base import (
    BlockTower,
    FastDropout,
    PositionalInput,
    ResidualFeedForward,
    SequenceBlock,
    TowerShape,
)
from model.towers.filters import causal_conv, circular_taps


class FilterBlock(SequenceBlock):
    """A learnable frequency response `[L // 2 + 1, d]` applied causally, then the FFN."""

    def __init__(self, dim: int, window: int, dropout: float, width: int) -> None:
        super().__init__()
        self.window = window
        self.response = nn.Parameter(torch.randn(window // 2 + 1, dim, 2) * 0.02)
        self.drop = FastDropout(dropout)
        self.norm = nn.LayerNorm(dim)
        self.ffn = ResidualFeedForward(dim, width, dropout)

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        """`x [B, L, d]` (zero at padding) -> `[B, L, d]`."""
        taps = circular_taps(torch.view_as_complex(self.response), self.window)
        return self.ffn(self.norm(x + self.drop(causal_conv(x, taps))))


@register_tower(FmlpSettings)
class FmlpTower(BlockTower):
    """FMLP-Rec: positions and items in, causal learnable filter blocks."""

    def __init__(self, settings: FmlpSettings, shape: TowerShape) -> None:
        super().__init__(shape)
        width = settings.ffn_width(shape.dim)
        self.inputs = PositionalInput(shape.dim, shape.max_len, shape.dropout)
        self.blocks.extend(
            FilterBlock(shape.dim, shape.max_len, shape.dropout, width)
            for _ in range(settings.num_layers)
        )
