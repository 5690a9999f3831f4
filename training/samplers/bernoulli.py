"""The Bernoulli sampler (Barber & Botev sec. 2.1.2): each item in the sample independently.

Item c is included with probability `b_c = min(1, s w_c)`, `w_c = (count_c + floor)^alpha`
(the popularity sampler's weights), and s is solved exactly by water-filling so that
`sum_c b_c = m` (or every item, when m >= n). A sample is a set: no repeats, and
`log_q = log b_c`, the expected count of c. `--sampler bernoulli` pairs it with the
`bernoulli` loss.

The number of negatives varies from draw to draw around its mean m (standard deviation
`sqrt(sum b (1 - b)) <= sqrt(m)`): the shared ids tensor is simply as long as the draw.
The draw is shared by the batch: its settings have no `per_query`.

Drawing n coins would cost O(n) per batch. The draw here costs O(m log n) and is exact:
items with b = 1 are always in; for the rest, K ~ Poisson(Lambda) ids are drawn with
replacement with probability proportional to `lambda_c = -log(1 - b_c)` (Lambda their sum)
and deduplicated. By Poisson splitting each item's number of copies is an independent
Poisson(lambda_c), so c is in the set independently with probability `1 - e^-lambda_c = b_c`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler
from training.samplers.popularity import CategoricalTable, PopularityWeights, popularity_weights


def inclusion_probabilities(weights: Tensor, num: int) -> Tensor:
    """`b = min(1, s w)` with `sum b = min(num, #{w > 0})`, solved exactly (water-filling).

    Args:
        weights: `[n + 1]` non-negative weights; index 0 (padding) is ignored.
        num: The expected sample size m.

    Returns:
        float64 `[n + 1]` inclusion probabilities, 0 at padding and at zero weights.

    """
    w = weights.detach().to(torch.float64).clone()
    w[0] = 0.0
    positive = int((w > 0).sum())
    if num >= positive:
        return (w > 0).to(torch.float64)
    desc = torch.sort(w, descending=True).values[:positive]
    # Capping the j largest at 1 leaves s_j = (m - j) / (sum of the rest); the answer is the
    # smallest j whose s_j leaves the (j + 1)-th largest below the cap.
    tail = desc.flip(0).cumsum(0).flip(0)  # tail[j] = sum of desc[j:]
    capped = torch.arange(positive, dtype=torch.float64)
    scale = (num - capped) / tail
    j = int(torch.nonzero(scale * desc <= 1.0)[0])
    return (w * float(scale[j])).clamp(max=1.0)


class BernoulliTable:
    """Independent inclusion of each item with probabilities b (see the module docstring).

    Args:
        b: float64 `[n + 1]` inclusion probabilities in [0, 1], 0 at padding.

    """

    def __init__(self, b: Tensor) -> None:
        self.b = b
        self.head = torch.nonzero(b >= 1.0)[:, 0]  # always included
        rate = -torch.log1p(-b.clamp(max=1.0 - 1e-16))
        rate[b >= 1.0] = 0.0
        self.total_rate = float(rate.sum())
        self.table = CategoricalTable(rate) if self.total_rate > 0 else None

    def draw(self, device: torch.device) -> Tensor:
        """int64 `[k]` sorted ids of one sample, k random with mean sum(b)."""
        if self.table is None:
            return self.head.to(device)
        count = int(torch.poisson(torch.tensor(self.total_rate, dtype=torch.float64)))
        drawn = self.table.draw((count,), self.head.device)
        return torch.cat([self.head, drawn]).unique().to(device)

    def log_b(self, ids: Tensor) -> Tensor:
        """float32 log b of `ids` (any shape)."""
        return torch.log(self.b.to(ids.device)[ids]).to(torch.float32)


class BernoulliSettings(PopularityWeights):
    """`sampler: {name: bernoulli}`: a set of mean size m, log q = log b."""

    name: Literal["bernoulli"] = "bernoulli"
    inclusion_probability: ClassVar[bool] = True
    pairs_with: ClassVar[dict[str, dict[str, Any]]] = {"loss": {"name": "bernoulli"}}


@register_sampler(BernoulliSettings)
class BernoulliSampler(Stateless):
    """Shared Bernoulli sample of mean size m; `log_q = log b` (see the module docstring)."""

    per_query = False  # one shared set per batch

    def __init__(self, cfg: BernoulliSettings, ctx: SamplerContext) -> None:
        self.weights = popularity_weights(cfg, ctx)
        self.num_negatives = cfg.num_negatives
        self.tables: dict[int, BernoulliTable] = {}

    def table(self, num: int) -> BernoulliTable:
        """The inclusion table of mean size `num` (solved once per size)."""
        if num not in self.tables:
            self.tables[num] = BernoulliTable(inclusion_probabilities(self.weights, num))
        return self.tables[num]

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """One shared set `[k]` (mean k = min(m, n)); log_q and pos_log_q are log b."""
        table = self.table(num)
        ids = table.draw(queries.device)
        return Negatives(ids=ids, log_q=table.log_b(ids), pos_log_q=table.log_b(positives))

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log(b_c / sum b): the item in one slot of a sample of mean size m.

        m is `cfg.num_negatives`, the size training draws.
        """
        b = self.table(self.num_negatives).b
        row = torch.log(b / b.sum()).to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(queries.shape[0], -1).clone()
