"""The uniform negative sampler: m draws with replacement, q_i = 1/n over items 1..n."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from training.sampler_settings import PerQueryDraws
from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler


class UniformSettings(PerQueryDraws):
    """`sampler: {name: uniform}`: the default sampler (m = 256, shared)."""

    name: Literal["uniform"] = "uniform"


@register_sampler(UniformSettings)
class UniformSampler(Stateless):
    """Draws item_idx uniformly from 1..n; `log_q = log(m / n)` for every draw.

    Shared `[m]` negatives by default, `[N, m]` with `cfg.per_query`. Stateless.
    """

    def __init__(self, cfg: UniformSettings, ctx: SamplerContext) -> None:
        self.num_items = ctx.num_items
        self.per_query = cfg.per_query

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw `num` ids (per query with `per_query`); see `NegativeSampler.sample`."""
        shape = (queries.shape[0], num) if self.per_query else (num,)
        ids = torch.randint(1, self.num_items + 1, shape, device=queries.device)
        log_q = torch.full(shape, math.log(num / self.num_items), device=queries.device)
        pos_log_q = torch.full(positives.shape, math.log(num / self.num_items), device=ids.device)
        return Negatives(ids=ids, log_q=log_q, pos_log_q=pos_log_q)

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw: `-log n` on items, -inf on the padding column."""
        out = torch.full(
            (queries.shape[0], self.num_items + 1), -math.log(self.num_items), device=queries.device
        )
        out[:, 0] = -math.inf
        return out
