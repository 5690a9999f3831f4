"""The in-batch negative sampler: the batch's positives are everybody's negatives.

The positives of a batch are N draws from the training data's item distribution
`p_i = count_i / sum(count)`, so the expected count of item i among them is `N p_i`, and
`log_q = log(N p_i)`. `num` is ignored: the result is always `[N]` shared.
p comes from the training split's interaction counts (`SamplerContext.item_counts`), which
also count each sequence's first item, never a target: an approximation of the targets'
distribution that overrates items which often open a sequence (about one count in L, the
mean sequence length).

In a data-parallel training the negatives are every rank's positives (TensorFlow Recommenders'
cross-replica concatenation): N is then the whole batch's count of positives, and each rank
embeds the gathered ids with its own copy of the item tower, so the gradients reach every
negative's row and DDP averages them like any other.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import Tensor

from training import distributed
from training.sampler_settings import SampledSettings
from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler


def data_probs(ctx: SamplerContext, floor: float = 0.0) -> Tensor:
    """`[n + 1]` float64 p_i of the positives' distribution: 0 at padding and unseen items.

    An item with no training count is never a training positive, so it is never an in-batch
    negative either. `floor`: counts below it are raised to it first (1: every item drawable).
    """
    counts = ctx.item_counts.detach().to(torch.float64).reshape(-1)[: ctx.num_items + 1]
    counts = counts.clamp_min(floor)
    counts[0] = 0.0
    total = float(counts.sum())
    if not total > 0.0:
        raise ValueError("in-batch sampling needs positive item counts")
    return counts / total


class InBatchSettings(SampledSettings):
    """`sampler: {name: in-batch}`: the batch's positives; `num_negatives` is not used."""

    name: Literal["in-batch"] = "in-batch"
    positives_as_negatives: ClassVar[bool] = True
    uses_num_negatives: ClassVar[bool] = False


@register_sampler(InBatchSettings)
class InBatchSampler(Stateless):
    """Negatives = the batch's positives `[N]`; `log_q = log(N p_i)` (see module doc)."""

    per_query = False  # always one shared draw, the batch's positives

    def __init__(self, cfg: InBatchSettings, ctx: SamplerContext) -> None:
        self.log_p = torch.log(data_probs(ctx))  # -inf where an item is never a positive
        self.floored_log_p = torch.log(data_probs(ctx, floor=1.0))

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """The positives `[N]` (of every rank) as shared negatives; `num` is ignored."""
        own = positives.reshape(-1).to(torch.int64)
        ids = distributed.gather_rows(own)  # one process: `own` itself
        log_p = self.log_p.to(ids.device)
        log_n = torch.log(torch.tensor(float(ids.shape[0]), dtype=torch.float64))
        log_q = (log_p[ids] + log_n).to(torch.float32)
        # Each positive is one of the N draws: its expected count is its own slot's.
        return Negatives(ids=ids, log_q=log_q, pos_log_q=(log_p[own] + log_n).to(torch.float32))

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log p_i of one positive (the same row for every query).

        For the diagnostics' KL, which an item the proposal can never draw would make
        infinite: items with no training count are floored to one count (then normalised).
        """
        row = self.floored_log_p.to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(queries.shape[0], -1).clone()
