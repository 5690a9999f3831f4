"""`lru`: linear recurrent units (LRURec), a diagonal complex recurrence run as a convolution.

Yue et al. 2024, "Linear Recurrent Units for Sequential Recommendation", after Orvieto et al.
2023: each block runs `h_t = lambda * h_{t-1} + gamma * (B x_t)` over a state of 2 d complex
channels, `lambda = exp(-nu + i theta)` with |lambda| drawn in [r_min, r_max] and theta in
[0, 2 pi), `gamma = sqrt(1 - |lambda|^2)`; the output `Re(C h_t)` joins the input (dropout,
LayerNorm), then a feed-forward layer (4 d wide). The recurrence over a window is the causal
convolution with taps `lambda^j` (`model/towers/filters.py`); at the window's last position
alone (`last`: the query, and the training step when that is the only target) it is one
weighted sum of the window. B and C act on the real and imaginary parts as real matrices (the
same family of maps as complex ones).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from model.tower_settings import LruSettings, register_tower
from model.towers.base import (
    BlockTower,
    FastDropout,
    ResidualFeedForward,
    SequenceBlock,
    TowerShape,
)
from model.towers.filters import causal_conv


class Recurrence(nn.Module):
    """One linear recurrent unit over a window, with its residual, dropout and LayerNorm."""

    def __init__(self, dim: int, window: int, dropout: float, radii: tuple[float, float]) -> None:
        super().__init__()
        self.state = 2 * dim
        self.window = window
        r_min, r_max = radii
        radius2 = torch.rand(self.state) * (r_max**2 - r_min**2) + r_min**2
        nu = -0.5 * torch.log(radius2)
        theta = torch.rand(self.state) * 2 * math.pi
        gamma = torch.sqrt(1 - radius2)
        self.params_log = nn.Parameter(
            torch.stack([nu.log(), theta.clamp_min(1e-6).log(), gamma.log()])
        )
        self.into = nn.Linear(dim, 2 * self.state)
        self.out = nn.Linear(2 * self.state, dim)
        self.drop = FastDropout(dropout)
        self.norm = nn.LayerNorm(dim)

    def taps(self) -> Tensor:
        """`[window, state]` complex: `gamma * lambda^j` for lags j = 0..window-1."""
        nu, theta, gamma = torch.exp(self.params_log.float())
        lags = torch.arange(self.window, device=nu.device, dtype=torch.float32).unsqueeze(1)
        return torch.exp(lags * torch.complex(-nu, theta)) * gamma

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        """`x [B, L, d]` (zero at padding), `pad [B, L]` -> `[B, L, d]`."""
        h = causal_conv(self._drive(x, pad), self.taps())
        return self._output(x, h)

    def last(self, x: Tensor, pad: Tensor) -> Tensor:
        """The last position alone, `[B, d]`: its state is one weighted sum over the window."""
        lags = self.taps()[: x.shape[1]].flip(0)  # position t is L - 1 - t steps back
        h = (self._drive(x, pad) * lags).sum(dim=1)
        return self._output(x[:, -1], h)

    def _drive(self, x: Tensor, pad: Tensor) -> Tensor:
        """`B x_t` as `[B, L, state]` complex, zero at padding."""
        drive = self.into(x).float() * (~pad).unsqueeze(-1)
        return torch.complex(drive[..., : self.state], drive[..., self.state :])

    def _output(self, x: Tensor, h: Tensor) -> Tensor:
        """`Re(C h)` joined to the input `x [*, d]`: dropout, residual, LayerNorm."""
        y = self.out(torch.cat([h.real, h.imag], dim=-1).to(x.dtype))
        return self.norm(x + self.drop(y))


class RecurrentBlock(SequenceBlock):
    """LRURec's block: the recurrence, then the feed-forward layer."""

    def __init__(self, settings: LruSettings, shape: TowerShape, width: int) -> None:
        super().__init__()
        radii = (settings.r_min, settings.r_max)
        self.recurrence = Recurrence(shape.dim, shape.max_len, shape.dropout, radii)
        self.ffn = ResidualFeedForward(shape.dim, width, shape.dropout)

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        """`x [B, L, d]`, `pad [B, L]` -> `[B, L, d]`."""
        return self.ffn(self.recurrence(x, pad))

    def last(self, x: Tensor, pad: Tensor) -> Tensor:
        """The last position alone: one step of the recurrence's sum, one feed-forward row."""
        return self.ffn(self.recurrence.last(x, pad))


class _Inputs(nn.Module):
    """LRURec's input layer: item embeddings, dropout, LayerNorm (no positions)."""

    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.drop = FastDropout(dropout)
        self.norm = nn.LayerNorm(dim)

    def forward(self, items: Tensor, seq: Tensor) -> Tensor:
        """`items [B, L, d]` (the ids' rows), `seq [B, L]` -> `[B, L, d]`, zero at padding."""
        x = self.norm(self.drop(items))
        return x * (seq != 0).unsqueeze(-1).to(x.dtype)


@register_tower(LruSettings)
class LruTower(BlockTower):
    """LRURec: items in, linear recurrent blocks."""

    def __init__(self, settings: LruSettings, shape: TowerShape) -> None:
        super().__init__(shape)
        width = settings.ffn_width(shape.dim)
        self.inputs = _Inputs(shape.dim, shape.dropout)
        self.blocks.extend(
            RecurrentBlock(settings, shape, width) for _ in range(settings.num_layers)
        )
