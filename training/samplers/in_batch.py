"""The in-batch negative sampler: the batch's positives are everybody's negatives.

The positives of a batch are N draws from the training data's item distribution
`p_i = count_i / sum(count)`, so the expected count of item i among them is `N p_i`, and
`log_q = log(N p_i)`. `num` and `per_query` are ignored: the result is always `[N]` shared.
"""

from __future__ import annotations

import torch
from torch import Tensor

from training.config import SamplerConfig
from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler


def data_log_probs(ctx: SamplerContext) -> Tensor:
    """`[n + 1]` float64 log p_i of the positives' distribution; -inf at padding.

    Items with a zero count (they can only be positives outside the training split) are
    given one count, so their log_q is finite rather than -inf.
    """
    counts = ctx.item_counts.detach().to(torch.float64).reshape(-1)[: ctx.num_items + 1]
    total = float(counts[1:].sum())
    if not total > 0.0:
        raise ValueError("in-batch sampling needs positive item counts")
    log_p = torch.log(counts.clamp_min(1.0) / total)
    log_p[0] = -torch.inf
    return log_p


@register_sampler("in-batch")
class InBatchSampler(Stateless):
    """Negatives = the batch's positives `[N]`; `log_q = log(N p_i)` (see module doc)."""

    per_query = False  # always one shared draw, the batch's positives

    def __init__(self, cfg: SamplerConfig, ctx: SamplerContext) -> None:
        self.log_p = data_log_probs(ctx)

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Return the positives `[N]` as shared negatives; `num` is ignored."""
        ids = positives.reshape(-1).to(torch.int64)
        log_p = self.log_p.to(ids.device)[ids]
        log_q = (log_p + torch.log(torch.tensor(float(ids.shape[0])))).to(torch.float32)
        # Each positive is one of the N draws: its expected count is its own slot's.
        return Negatives(ids=ids, log_q=log_q, pos_log_q=log_q.clone())

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log p_i of one positive (the same row for every query)."""
        row = self.log_p.to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(queries.shape[0], -1).clone()
