"""What every query tower shares: its shape, the input table, the inference API, the pieces.

Sequences are LEFT-padded with item_idx 0 (most recent item last), so the last position is
always the newest item and learned positions count from the end of the window. Every tower
outputs plain vectors, whose dot products are SASRec's logits (L2-normalised with
`model.normalize`: cosine logits); the logit of a (query, item) pair is `h . c / temperature`.

Every tower is causal (the output at position t depends on the items at positions <= t only)
unless its settings say `sees_later_items()` (bsarec's whole window or embedded padding,
trained at the last position only), and padding in front changes nothing (padded positions are
zero between blocks) unless the padding is embedded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn


@dataclass(frozen=True)
class TowerShape:
    """The sizes and switches every query tower is built with (from `ModelConfig`)."""

    num_items: int
    dim: int
    max_len: int
    dropout: float = 0.0
    sparse: bool = False
    normalize: bool = True


def unit_or_plain(x: Tensor, normalize: bool) -> Tensor:
    """`x [*, d]` L2-normalised along d when `normalize`, else as it is."""
    return F.normalize(x, dim=-1) if normalize else x


def item_embedding(num_items: int, dim: int, sparse: bool) -> nn.Embedding:
    """The `[n + 1, d]` id table (row 0, the padding, zero), shared with the item tower."""
    table = nn.Embedding(num_items + 1, dim, padding_idx=0, sparse=sparse)
    nn.init.normal_(table.weight, std=dim**-0.5)
    with torch.no_grad():
        table.weight[0].zero_()
    return table


def normal_init(model: nn.Module, std: float) -> None:
    """The published SASRec-family code's initialisation (`model.init_std`), in place.

    Every linear layer's, attention projection's and id table's weights ~ N(0, std^2), their
    biases and padding rows zero, layer norms at one and zero; other parameters as they are.
    """
    for part in model.modules():
        if isinstance(part, nn.Linear | nn.Embedding):
            nn.init.normal_(part.weight, std=std)
        if isinstance(part, nn.MultiheadAttention) and part.in_proj_weight is not None:
            nn.init.normal_(part.in_proj_weight, std=std)
        if isinstance(part, nn.LayerNorm):
            nn.init.ones_(part.weight)
        for name in ("bias", "in_proj_bias"):
            bias = getattr(part, name, None)
            if isinstance(bias, nn.Parameter):
                nn.init.zeros_(bias)
        if isinstance(part, nn.Embedding) and part.padding_idx is not None:
            with torch.no_grad():
                part.weight[part.padding_idx].zero_()


def fit_left(seq: Tensor, length: int) -> Tensor:
    """Keep the last `length` columns: `[B, *] -> [B, <= L]` (at least one column).

    Shorter input is left as it is: positions count from the end, so left padding changes
    nothing but the cost.
    """
    if seq.shape[1] == 0:
        return F.pad(seq, (1, 0), value=0)
    return seq[:, max(seq.shape[1] - length, 0) :]


def kept(seq: Tensor, like: Tensor) -> Tensor:
    """`[B, L, 1]`: 1 at an item, 0 at padding, in `like`'s dtype."""
    return (seq != 0).unsqueeze(-1).to(like.dtype)


class QueryTowerBase(nn.Module):
    """The inference API of every query tower; a tower implements `forward`."""

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
        history = fit_left(history, self.max_len)
        return self.forward(history)[:, -1]


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


def feed_forward(dim: int, width: int, dropout: float) -> nn.Sequential:
    """The position-wise layer of a block: d -> width -> d with a GELU between."""
    return nn.Sequential(
        nn.Linear(dim, width), nn.GELU(), FastDropout(dropout), nn.Linear(width, dim)
    )


def causal_attention_mask(pad: Tensor, num_heads: int) -> Tensor:
    """Block future keys and padded keys; `pad [B, L]` -> `[B * heads, L, L]` (True = blocked).

    A padded query row would have no allowed key (softmax of nothing is NaN), so every
    position may always attend to itself; padded outputs are ignored downstream.
    """
    length = pad.shape[1]
    future = torch.ones(length, length, dtype=torch.bool, device=pad.device).triu(1)
    mask = future.unsqueeze(0) | pad.unsqueeze(1)
    eye = torch.eye(length, dtype=torch.bool, device=pad.device)
    return (mask & ~eye).repeat_interleave(num_heads, dim=0)


class PositionalInput(nn.Module):
    """Item plus learned position embeddings, layer-normalised, dropped out, zero at padding.

    The input layer of the frequency-domain towers (FMLP-Rec's and BSARec's embedding layer).
    `zero_padding=False` keeps a padded position's row (its position embedding, normalised).
    """

    def __init__(self, dim: int, max_len: int, dropout: float, zero_padding: bool = True) -> None:
        super().__init__()
        self.max_len = max_len
        self.zero_padding = zero_padding
        self.positions = nn.Embedding(max_len, dim)
        nn.init.normal_(self.positions.weight, std=dim**-0.5)
        self.norm = nn.LayerNorm(dim)
        self.drop = FastDropout(dropout)

    def forward(self, items: Tensor, seq: Tensor) -> Tensor:
        """`items [B, L, d]` (the ids' rows), `seq [B, L]` -> `[B, L, d]`.

        Positions count from the end of the window.
        """
        length = seq.shape[1]
        where = torch.arange(self.max_len - length, self.max_len, device=seq.device)
        if not self.zero_padding:  # a kept padded row is its position alone, never an id's row
            items = items * kept(seq, items)
        x = self.drop(self.norm(items + self.positions(where)))
        return x * kept(seq, x) if self.zero_padding else x


class ResidualFeedForward(nn.Module):
    """Post-LayerNorm feed-forward sublayer: `norm(x + dropout(W2 gelu(W1 x)))`.

    The position-wise layer of FMLP-Rec's, BSARec's and LRURec's blocks.
    """

    def __init__(self, dim: int, width: int, dropout: float) -> None:
        super().__init__()
        self.inner = nn.Linear(dim, width)
        self.outer = nn.Linear(width, dim)
        self.drop = FastDropout(dropout)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: Tensor) -> Tensor:
        """`[B, L, d] -> [B, L, d]`, each position on its own."""
        return self.norm(x + self.drop(self.outer(F.gelu(self.inner(x)))))


class SequenceBlock(nn.Module):
    """A block of a `BlockTower`: `block(x [B, L, d], pad [B, L]) -> [B, L, d]`.

    `last` is its output at the last position alone; a block whose last position costs less
    than the window (attention's one query, a feed-forward layer on one row) overrides it.
    """

    def last(self, x: Tensor, pad: Tensor) -> Tensor:
        """`x [B, L, d]`, `pad [B, L]` -> `[B, d]`: the block's output at the last position."""
        return self(x, pad)[:, -1]


class BlockTower(QueryTowerBase):
    """A tower of an input layer and residual blocks, zero at padding between blocks.

    The input layer is called as `inputs(rows [B, L, d], seq [B, L])` with the ids' rows of
    the tower's table (which it does not hold: the table is saved once), a block is a
    `SequenceBlock` (a block that cheapens its last position alone: bsarec's); the last block's
    output, normalised with `normalize`, is the query. `encode` runs the last block through
    its `last`.
    """

    def __init__(self, shape: TowerShape) -> None:
        super().__init__()
        self.max_len = shape.max_len
        self.normalize = shape.normalize
        self.item_embedding = item_embedding(shape.num_items, shape.dim, shape.sparse)
        self.inputs: nn.Module
        self.blocks = nn.ModuleList()

    def forward(self, seq: Tensor) -> Tensor:
        """`seq [B, L]` left-padded -> `[B, L, d]`; position t sees positions <= t only."""
        x, pad, keep = self._below(seq, self.blocks)
        return (unit_or_plain(x, self.normalize) * keep)[:, -seq.shape[1] :]  # `_below` may widen

    def encode(self, history: Tensor) -> Tensor:
        """`history [B, L]` -> `[B, d]`, `forward`'s last position, the last block on it alone."""
        seq = fit_left(history, self.max_len)
        *body, final = self.blocks
        x, pad, keep = self._below(seq, body)
        query = final.last(x, pad) if isinstance(final, SequenceBlock) else final(x, pad)[:, -1]
        return unit_or_plain(query, self.normalize) * keep[:, -1]

    def _below(self, seq: Tensor, blocks: Iterable[nn.Module]) -> tuple[Tensor, Tensor, Tensor]:
        """The input layer and `blocks` on `seq`: x `[B, L, d]`, pad `[B, L]`, keep `[B, L, 1]`."""
        x = self.inputs(self.item_embedding(seq), seq)
        keep = kept(seq, x)
        pad = seq == 0
        for block in blocks:
            x = block(x, pad) * keep
        return x, pad, keep
