"""TAPAS, two-pass approximate adaptive sampling (Bai, Goldman & Zhang; tapas.txt).

Algorithm 1, for one batch of queries h_1..h_N and m negatives:

1. Non-adaptive pass: a presample S' of min(r m, n) distinct items from the squashed
   popularity Q_c ~ max(count_c^alpha, beta) (the paper's max(f^alpha, beta), f the item's
   training count). Drawn as a Bernoulli sample (`training/samplers/bernoulli.py`) with
   inclusion probabilities b_c = min(1, s Q_c) summing to min(r m, n): a set, as the paper's
   S' is, whose expected size is exactly min(r m, n), with exact log q = log b_c; r m >= n
   takes the whole catalogue, as the paper's min does.
2. Adaptive pass: score every c in S' against the whole batch, sum_i exp(h_i . c / tau),
   and keep the top m as the batch's shared negatives (computed as a logsumexp: one
   `[N, |S'|]` product and a top-k).

First pass from a kernel (`first_pass: midx`, our option, not the paper's): the presample
is the distinct ids of R = min(r m, n) draws with replacement from midx's law for the batch
(`training/samplers/midx.py`, shared: the mixture of the batch's quantised softmaxes, times the
same squashed popularity as its last stage, (count + 1)^alpha). An id of one-draw
probability q is in it with probability 1 - (1 - q)^R, its exact log q (an inclusion
probability, as the Bernoulli presample's). The presample then follows the model, not
popularity alone; the second pass is the same.

Algorithm 2 (`shards` k): the catalogue is split once into k random shards; each shard
keeps the top m / k of its own slice of S' (the first m mod k shards one more), and the
negatives are their union. k = 1 is exactly Algorithm 1. In a data-parallel training with k =
the number of ranks, the ranks are the paper's parameter servers (`TapasSampler.select`).

The temperature tau decreases over training ("during the training, we reduce the temperature
over time", sec. 3.2; the paper gives no formula): from `temperature` at the start to
`temperature_final` at the end, geometrically (`exponential`) or linearly, following
the fraction of training the trainer reports through `set_progress`.

Correction: the paper deliberately does not correct for the skew of the second pass
(`correction: none`: `log_q` is None and the loss subtracts nothing). `presample`
subtracts each kept id's presample log q, log b_c: the kept ids are then the largest terms
of the presample's importance-sampling estimate of the partition function. Either way the
random first pass travels in `Negatives.presample` with its exact log q.

The defaults: the loss subtracts the presample's log q, which beat the paper's uncorrected
choice at every temperature tried, and tau anneals from 1.0 to 0.05 over training (best
Recall@10; a constant 0.2 had a slightly better NDCG@10): benchmarks/results/tapas_settings/,
measured with the model at temperature 0.05 (the default then; 0.1 since the recipe study).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor

from training import distributed
from training.annealing import annealed_temperature
from training.sampler_settings import TracksTheTable
from training.samplers.base import Negatives, SamplerContext, register_sampler
from training.samplers.bernoulli import BernoulliTable, inclusion_probabilities
from training.samplers.midx import MidxSampler, MidxSettings


class TapasSettings(TracksTheTable):
    """`sampler: {name: tapas}` (the defaults: the module docstring)."""

    name: Literal["tapas"] = "tapas"
    ratio: float = Field(
        8.0, ge=1.0, description="Presample factor r (min(r m, n) items in the first pass)."
    )
    alpha: float = Field(0.75, ge=0.0, le=1.0, description="First pass ~ max(count^alpha, beta).")
    beta: float = Field(1.0, gt=0.0, description="Floor beta of the squashed popularity.")
    temperature: float | None = Field(
        1.0, gt=0.0, description="Second-pass temperature at the start; None = the model's."
    )
    temperature_final: float | None = Field(
        0.05, gt=0.0, description="Temperature at the end of training; None = no annealing."
    )
    anneal: Literal["exponential", "linear"] = Field(
        "exponential", description="How the temperature moves from start to final."
    )
    correction: Literal["none", "presample"] = Field(
        "presample", description="The presample's log q, or nothing (the paper's choice)."
    )
    shards: int = Field(1, ge=1, description="k shards each keeping the top m / k of its slice.")
    first_pass: Literal["popularity", "midx"] = Field(
        "popularity",
        description="The presample: the squashed popularity (the paper's), or midx's batch "
        "law (quantised softmax times the popularity).",
    )
    codewords: int = Field(64, ge=1, description="midx's K codewords per codebook (first_pass).")
    inclusion_probability: ClassVar[bool] = True  # of its first pass
    pairs_with: ClassVar[dict[str, dict[str, Any]]] = {"loss": {"name": "sampled_softmax"}}
    own_temperature: ClassVar[str | None] = "temperature"

    def fixes_the_temperature(self) -> bool:
        """Without its own `temperature`, its annealing starts from the model's tau."""
        return self.temperature is None

    def reports_log_q(self) -> bool:
        """`correction: none` (the paper's choice) subtracts no log q."""
        return self.correction != "none"

    @property
    def refits_sparse(self) -> bool:  # type: ignore[override]
        """A midx first pass refits its codebooks with sparse tables too (updates cannot)."""
        return self.first_pass == "midx"

    def kernel_settings(self) -> MidxSettings:
        """The midx first pass's settings: one shared law per batch, this presample's alpha."""
        return MidxSettings(
            per_query=False, codewords=self.codewords, popularity_alpha=self.alpha,
            num_negatives=self.num_negatives, refresh_every=self.refresh_every,
        )  # fmt: skip


def shard_top(scores: Tensor, shard: Tensor, num: int, shards: int) -> Tensor:
    """Positions of the kept entries: the top `num // k (+1)` scores within each shard.

    Args:
        scores: `[p]` scores of the presample.
        shard: `[p]` int64 shard (0..k-1) of each presampled item.
        num: m, the number kept in all (shard j keeps m // k, plus 1 for j < m mod k).
        shards: k.

    Returns:
        int64 positions into `scores`, shard by shard, best first within a shard.

    """
    order = torch.argsort(scores, descending=True, stable=True)
    grouped = order[torch.argsort(shard[order], stable=True)]  # by shard, then by score
    sizes = torch.bincount(shard, minlength=shards)
    starts = torch.cumsum(sizes, 0) - sizes
    by_shard = shard[grouped]
    rank = torch.arange(grouped.numel(), device=scores.device) - starts[by_shard]
    quota = shard_quota(num, shards).to(scores.device)
    return grouped[rank < quota[by_shard]]


def shard_quota(num: int, shards: int) -> Tensor:
    """`[k]` how many each shard keeps: m // k, plus one for the first m mod k shards."""
    return num // shards + (torch.arange(shards) < num % shards).long()


@register_sampler(TapasSettings)
class TapasSampler:
    """Two-pass adaptive sampler; see the module docstring. Keeps a copy of the item table."""

    per_query = False  # the second pass scores against the whole batch: one shared set

    def __init__(self, cfg: TapasSettings, ctx: SamplerContext) -> None:
        counts = ctx.item_counts.detach().to(torch.float64).reshape(-1)[: ctx.num_items + 1]
        self.weights = counts.pow(cfg.alpha).clamp_min(cfg.beta)
        self.weights[0] = 0.0
        self.num_items = ctx.num_items
        self.ratio = cfg.ratio
        self.correct = cfg.reports_log_q()
        self.num_negatives = cfg.num_negatives
        self.shards = cfg.shards
        gen = torch.Generator().manual_seed(0)
        self.shard_of = torch.randint(0, self.shards, (ctx.num_items + 1,), generator=gen)
        start = cfg.temperature or ctx.temperature
        self.schedule = (start, cfg.temperature_final, cfg.anneal)
        self.temperature = start
        self.items: Tensor | None = None  # [n + 1, d]
        self.tables: dict[int, BernoulliTable] = {}
        midx = cfg.first_pass == "midx"
        self.kernel = MidxSampler(cfg.kernel_settings(), ctx) if midx else None

    def presample_size(self, num: int) -> int:
        """min(r m, n): the first pass's expected size."""
        return min(math.ceil(self.ratio * num), self.num_items)

    def _table(self, num: int) -> BernoulliTable:
        size = self.presample_size(num)
        if size not in self.tables:
            self.tables[size] = BernoulliTable(inclusion_probabilities(self.weights, size))
        return self.tables[size]

    def set_progress(self, fraction: float) -> None:
        """Move the second-pass temperature along its schedule."""
        self.temperature = annealed_temperature(*self.schedule[:2], self.schedule[2], fraction)

    def refresh(self, item_emb: Tensor) -> None:
        """Copy the whole table `[n + 1, d]` (and refit a midx first pass)."""
        self.items = item_emb.detach().to(torch.float32).clone()
        if self.kernel is not None:
            self.kernel.refresh(item_emb)

    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Overwrite rows `item_idx [k]` with `item_emb [k, d]` (and move them in midx's cells)."""
        if self.items is None:
            raise RuntimeError("tapas sampler: refresh() must be called before update()")
        self.items[item_idx.to(self.items.device)] = item_emb.detach().to(self.items)
        if self.kernel is not None:
            self.kernel.update(item_idx, item_emb)

    def batch_scores(self, queries: Tensor, ids: Tensor) -> Tensor:
        """`[p]` log sum_i exp(h_i . c / tau) of items `ids [p]` against queries `[N, d]`."""
        if self.items is None:
            raise RuntimeError("tapas sampler: refresh() must be called before sample()")
        cand = self.items[ids.to(self.items.device)]  # [p, d]
        logits = cand @ (queries.detach().to(cand).T / self.temperature)  # [p, N]
        return torch.logsumexp(logits, dim=1)

    @torch.no_grad()
    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Shared `[k]` negatives, k <= m (fewer when the presample or a shard runs short)."""
        over_ranks = distributed.active() and self.shards == distributed.rank_and_world()[1]
        presample, log_q_of = self._presample(queries, positives, num, over_ranks)
        ids = self.select(queries, presample.ids, num, over_ranks)
        if not self.correct:
            return Negatives(ids, None, None, presample=presample)
        return Negatives(ids, log_q_of(ids), presample.pos_log_q, presample=presample)

    def _presample(
        self, queries: Tensor, positives: Tensor, num: int, over_ranks: bool
    ) -> tuple[Negatives, Callable[[Tensor], Tensor]]:
        """The first pass, and the log q (an inclusion probability) of any of its ids."""
        if self.kernel is not None:
            if over_ranks:
                raise RuntimeError("tapas: a midx first pass is one rank's law; use shards: 1")
            presample = self._kernel_presample(queries, positives, num)
            sorted_ids, log_q = presample.ids, presample.log_q
            assert log_q is not None
            return presample, lambda ids: log_q[torch.searchsorted(sorted_ids, ids)]
        table = self._table(num)
        pre_ids = table.draw(queries.device)
        if over_ranks:  # Algorithm 2 over the ranks: one presample, the whole batch's queries
            pre_ids = distributed.rows_of_rank_zero(pre_ids)
        return Negatives(pre_ids, table.log_b(pre_ids), table.log_b(positives)), table.log_b

    def _kernel_presample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """The distinct ids (sorted) of min(r m, n) midx draws, with log inclusion probabilities."""
        assert self.kernel is not None
        draws = self.presample_size(num)
        drawn = self.kernel.sample(queries, positives, draws)  # log_q: log(draws q)
        assert drawn.log_q is not None and drawn.pos_log_q is not None
        ids, at = torch.unique(drawn.ids, return_inverse=True)
        log_count = torch.empty(len(ids), dtype=drawn.log_q.dtype, device=ids.device)
        log_count.scatter_(0, at, drawn.log_q)  # every copy of an id has the same log q
        pos = _log_inclusion(drawn.pos_log_q, draws)
        return Negatives(ids, _log_inclusion(log_count, draws), pos)

    def select(
        self, queries: Tensor, pre_ids: Tensor, num: int, over_ranks: bool = False
    ) -> Tensor:
        """The second pass: the kept ids of presample `pre_ids [p]` against `queries [N, d]`.

        `over_ranks` (`shards` = the number of ranks): rank j is Algorithm 2's
        parameter server j. It scores its shard's slice of the presample against every rank's
        queries and keeps that shard's top m / k; the ranks' kept ids, gathered in rank order,
        are exactly what one process keeps with k shards over the whole batch.
        """
        if over_ranks:
            return self._select_over_ranks(queries, pre_ids, num)
        scores = self.batch_scores(queries, pre_ids)
        if self.shards == 1:  # Algorithm 1: the top m of the whole presample
            keep = scores.topk(min(num, scores.numel())).indices
        else:
            shard = self.shard_of[pre_ids.cpu()].to(scores.device)
            keep = shard_top(scores, shard, num, self.shards)
        return pre_ids[keep.to(pre_ids.device)]

    def _select_over_ranks(self, queries: Tensor, pre_ids: Tensor, num: int) -> Tensor:
        """Every rank's kept ids: each scores its shard of `pre_ids` against all ranks' queries."""
        rank = distributed.rank_and_world()[0]
        mine = pre_ids[self.shard_of[pre_ids.cpu()].to(pre_ids.device) == rank]
        scores = self.batch_scores(distributed.gather_rows(queries), mine)
        quota = int(shard_quota(num, self.shards)[rank])
        return distributed.gather_rows(mine[scores.topk(min(quota, scores.numel())).indices])

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log(b_c / sum b): one slot of the first pass (the second is not a law).

        The presample's size is that of `cfg.num_negatives` negatives; a midx first pass
        gives its one-draw law.
        """
        if self.kernel is not None:
            return self.kernel.proposal_log_probs(queries)
        b = self._table(self.num_negatives).b
        row = torch.log(b / b.sum()).to(device=queries.device, dtype=torch.float32)
        return row.unsqueeze(0).expand(queries.shape[0], -1).clone()


def _log_inclusion(log_count: Tensor, draws: int) -> Tensor:
    """Log P(an id is among `draws` draws with replacement), from `log_count` = log(draws q)."""
    q = (log_count.double() - math.log(draws)).exp().clamp(max=1.0)
    return torch.log(-torch.expm1(draws * torch.log1p(-q))).to(log_count.dtype)
