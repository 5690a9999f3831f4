"""Mixed negative sampling (Yang et al. 2020): in-batch positives plus m sampled items.

The sampled part comes from the popularity table `(count + floor)^alpha`; set `alpha: 0` for
the uniform mixture of the paper. The combined draw holds the N
positives (expected count of i: `N p_i`, p the data distribution) and m draws from q
(`m q_i`), so every slot reports `log_q = log(N p_i + m q_i)`, the expected count of its id
in the whole combined draw. Shared: ids `[N + m]`; per query: `[N, N + m]` (the positives
repeated on every row, then that row's own m draws).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import Tensor

from training.sampler_settings import PerQueryDraws
from training.samplers.base import Negatives, SamplerContext, Stateless, register_sampler
from training.samplers.in_batch import data_probs
from training.samplers.popularity import CategoricalTable, PopularityWeights, popularity_weights


class MixedSettings(PopularityWeights, PerQueryDraws):
    """`sampler: {name: mixed}`: the batch's positives plus m popularity draws."""

    name: Literal["mixed"] = "mixed"
    positives_as_negatives: ClassVar[bool] = True


@register_sampler(MixedSettings)
class MixedSampler(Stateless):
    """In-batch positives + `num` popularity/uniform draws; see the module docstring."""

    def __init__(self, cfg: MixedSettings, ctx: SamplerContext) -> None:
        self.per_query = cfg.per_query
        self.num_negatives = cfg.num_negatives
        self.table = CategoricalTable(popularity_weights(cfg, ctx))
        self.data_p = data_probs(ctx)  # [n + 1] float64, 0 at padding and unseen items

    def _log_expected(self, ids: Tensor, batch: int, num: int) -> Tensor:
        """Float32 `log(N p_i + m q_i)` for `ids` of any shape."""
        p = self.data_p.to(ids.device)[ids]
        return torch.log(batch * p + num * self.table.probs_of(ids)).to(torch.float32)

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Positives `[N]` then `num` draws; shared `[N + m]` or per query `[N, N + m]`."""
        pos = positives.reshape(-1).to(torch.int64).to(queries.device)
        n = pos.shape[0]
        if self.per_query:
            drawn = self.table.draw((n, num), queries.device)
            ids = torch.cat([pos.unsqueeze(0).expand(n, -1), drawn], dim=1)
        else:
            ids = torch.cat([pos, self.table.draw((num,), queries.device)])
        return Negatives(
            ids=ids,
            log_q=self._log_expected(ids, n, num),
            pos_log_q=self._log_expected(pos, n, num),
        )

    def proposal_log_probs(self, queries: Tensor, num: int | None = None) -> Tensor:
        """`[N, n + 1]` log q of one slot of the combined draw, N = `queries.shape[0]`.

        One slot picked at random from the N + m slots holds item i with probability
        `(N p_i + m q_i) / (N + m)`; m is `num`, by default `cfg.num_negatives`.
        """
        n = queries.shape[0]
        num = self.num_negatives if num is None else num
        mix = (n * self.data_p + num * self.table.probs) / (n + num)
        row = torch.log(mix).to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(n, -1).clone()
