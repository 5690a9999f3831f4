"""One validation (or test) round of the training module: what it collects, gathers and scores.

Each eval batch adds its users' full-ranking ranks and target log-probabilities, and the
round keeps the first `keep` users' queries (split order) for the KL diagnostic. At the end
`metrics()` gathers every rank's share (one process: its own), so that every rank computes
the same metrics from the same users, each counted once, and checks that the ranks' item
tables agree; `proposal_kl()` then measures the sampler's bias on the gathered queries.
"""

from __future__ import annotations

import torch
from torch import Tensor

from training import distributed
from training.diagnostics import proposal_kl
from training.evaluation.metrics import ranking_metrics
from training.samplers import NegativeSampler


class ValidationRound:
    """The round's item table `[n + 1, d]` and temperature, ranks, log-probabilities, KL queries.

    The table and the temperature are the round's start's: the weights a moving average
    (`training.loop.weight_average`) swaps in for the round are back out before its last hook.
    """

    def __init__(self, item_emb: Tensor, keep: int, temperature: float) -> None:
        self.item_emb = item_emb
        self.temperature = temperature
        self.keep = keep
        self.ranks: list[Tensor] = []
        self.log_p: list[Tensor] = []
        self.kl_rows = torch.empty(0, dtype=torch.int64, device=item_emb.device)
        self.queries = item_emb.new_empty(0, item_emb.shape[1])

    def add(self, ranks: Tensor, log_p: Tensor, queries: Tensor, rows: Tensor) -> None:
        """One batch: ranks `[B]`, log_p `[B]`, queries `[B, d]`, split rows `[B]`."""
        self.ranks.append(ranks)
        self.log_p.append(log_p)
        self._keep_queries(queries, rows)

    def _keep_queries(self, queries: Tensor, rows: Tensor) -> None:
        """Keep the queries of the first `keep` users in split order."""
        rows = torch.cat([self.kl_rows, rows])
        queries = torch.cat([self.queries, queries])
        first = rows.argsort()[: self.keep]
        self.kl_rows, self.queries = rows[first], queries[first]

    def gather(self) -> tuple[Tensor, Tensor]:
        """Ranks and log-probabilities `[U]` of every rank's users; the KL queries gathered too."""
        empty = self.item_emb.new_empty(0)
        ranks = torch.cat(self.ranks) if self.ranks else empty.long()
        log_p = torch.cat(self.log_p) if self.log_p else empty
        if distributed.active():
            rows = distributed.gather_rows(self.kl_rows)
            queries = distributed.gather_rows(self.queries)
            self.kl_rows, self.queries = rows[:0], queries[:0]
            self._keep_queries(queries, rows)
        return distributed.gather_rows(ranks), distributed.gather_rows(log_p)

    def table_fingerprint(self) -> float:
        """A number that changes with any row of the item table (compared across ranks)."""
        table = self.item_emb.double()
        weights = torch.arange(len(table), dtype=torch.float64, device=table.device)
        return float(table.sum(1) @ weights)

    def metrics(self, ks: list[int], device: torch.device) -> dict[str, float]:
        """Every rank's users' ranking metrics (`recall@K`, ...); empty for a round without users.

        DDP keeps the weights identical on every rank: a different table is a bug, not noise.
        """
        ranks, log_p = self.gather()
        if ranks.numel() == 0:
            return {}
        distributed.check_same(self.table_fingerprint(), "the item table", rel=1e-9, device=device)
        return {name: float(value) for name, value in ranking_metrics(ranks, log_p, ks).items()}

    def proposal_kl(
        self, sampler: NegativeSampler, by_magnitude: bool, device: torch.device
    ) -> float:
        """KL(the round's softmax || `sampler`'s proposal) over the kept queries; rank-checked.

        After `metrics()`, whose gather gives every rank the same queries (before it, each
        rank's own: the ranks' check would fail).
        """
        kl = proposal_kl(sampler, self.queries, self.item_emb, self.temperature, by_magnitude)
        what = "the sampler's proposal (its tree or table)"
        distributed.check_same(kl, what, rel=1e-9, device=device)
        return kl
