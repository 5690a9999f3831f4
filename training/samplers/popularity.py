"""The popularity negative sampler, q_i proportional to (count_i + floor)^alpha.

Also owns `CategoricalTable`, the O(log n)-per-draw inverse-CDF sampler that `mixed` reuses.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import Tensor

from training.sampler_settings import PerQueryDraws, SampledSettings
from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler


class CategoricalTable:
    """A fixed distribution over items 1..n sampled by inverse CDF (searchsorted).

    Args:
        weights: `[n + 1]` non-negative weights; index 0 (padding) is ignored.

    """

    def __init__(self, weights: Tensor) -> None:
        w = weights.detach().to(torch.float64).clone()
        w[0] = 0.0
        total = float(w.sum())
        if not total > 0.0 or not math.isfinite(total):
            raise ValueError("sampling weights must have a positive, finite sum")
        self.probs = w / total  # [n + 1], float64
        self.cdf = torch.cumsum(self.probs, 0)
        self.log_probs = torch.log(self.probs)  # -inf at 0 and at zero-weight items

    def draw(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        """Int64 item_idx of `shape`, drawn with replacement; zero-weight items never drawn."""
        u = torch.rand(shape, dtype=torch.float64) * float(self.cdf[-1])
        ids = torch.searchsorted(self.cdf, u, right=True)
        return ids.clamp_(1, self.cdf.shape[0] - 1).to(device)

    def probs_of(self, ids: Tensor) -> Tensor:
        """Float64 q of one draw for `ids` (any shape)."""
        return self.probs.to(ids.device)[ids]


class PopularityWeights(SampledSettings):
    """Settings of a sampler whose proposal is q ~ (count + floor)^alpha (popularity, mixed)."""

    alpha: float = Field(0.75, ge=0.0, description="q ~ (count + floor)^alpha.")
    floor: float = Field(1.0, ge=0.0, description="Added to counts so unseen items are drawn.")


class PopularitySettings(PopularityWeights, PerQueryDraws):
    """`sampler: {name: popularity}`."""

    name: Literal["popularity"] = "popularity"


def popularity_weights(cfg: PopularityWeights, ctx: SamplerContext) -> Tensor:
    """`[n + 1]` weights `(count + floor)^alpha` (index 0 set to 0)."""
    return count_weights(ctx, cfg.alpha, cfg.floor)


def count_weights(ctx: SamplerContext, alpha: float, floor: float) -> Tensor:
    """`[n + 1]` float64 weights `(count + floor)^alpha` of the items (index 0 set to 0)."""
    counts = ctx.item_counts.detach().to(torch.float64).reshape(-1)[: ctx.num_items + 1]
    w = (counts + floor).pow(alpha)
    w[0] = 0.0
    return w


@register_sampler(PopularitySettings)
class PopularitySampler(Stateless):
    """Draws item_idx with q_i proportional to `(count_i + floor)^alpha`; `log_q = log(m q_i)`.

    Shared `[m]` negatives by default, `[N, m]` with `cfg.per_query`. Stateless.
    """

    def __init__(self, cfg: PopularitySettings, ctx: SamplerContext) -> None:
        self.per_query = cfg.per_query
        self.table = CategoricalTable(popularity_weights(cfg, ctx))

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw `num` ids (per query with `per_query`); see `NegativeSampler.sample`."""
        shape = (queries.shape[0], num) if self.per_query else (num,)
        ids = self.table.draw(shape, queries.device)
        log_q = torch.log(num * self.table.probs_of(ids)).to(torch.float32)
        pos_log_q = torch.log(num * self.table.probs_of(positives.to(ids.device)))
        return Negatives(ids=ids, log_q=log_q, pos_log_q=pos_log_q.to(torch.float32))

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw (the same row for every query; -inf at padding)."""
        row = self.table.log_probs.to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(queries.shape[0], -1).clone()
