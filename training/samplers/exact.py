"""The exact sampler: draws from the current model's softmax exp(h.c / tau) over items 1..n.

O(n d) per batch: the reference the kernel samplers approximate. `cfg.nu` draws from
softmax(nu h . c) instead: on L2-normalised vectors that is the exact Gaussian kernel
exp(-nu ||h - c||^2 / 2) that `rff` estimates, i.e. rff with no RFF noise (its D -> infinity,
one-bucket limit), so it measures what a kernel of that sharpness can reach.

It keeps its own copy of the item table, set by `refresh()` and patched by `update()`. Per
query (`cfg.per_query`), row r draws from `softmax(nu h_r . C)`; shared, the m draws come
from the batch mixture `q = mean_r softmax_r` and `log_q = log(m q_i)` is that mixture's
probability.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor

from training.sampler_settings import PerQueryDraws, TracksTheTable
from training.samplers.base import Negatives, SamplerContext, register_sampler

_MAX_CHUNK_CELLS = 1 << 24  # query rows x items scored at once (bounds memory)


def _softmax_and_lse(logits: Tensor) -> tuple[Tensor, Tensor]:
    """`[c, n]` softmax rows and `[c, 1]` their log-sum-exp, in one softmax pass.

    The log-sum-exp comes from each row's largest entry, whose probability is at least 1 / n:
    log q of any item is then its logit minus it, exact where the softmax itself underflows.
    """
    top, at = logits.max(dim=1, keepdim=True)
    probs = torch.softmax(logits, dim=1)
    return probs, top - probs.gather(1, at).log()


class ExactSettings(TracksTheTable, PerQueryDraws):
    """`sampler: {name: exact}`: per query by default."""

    name: Literal["exact"] = "exact"
    per_query: bool = Field(True, description="Per-query negatives [N, m] instead of [m].")
    nu: float | None = Field(
        None, gt=0.0, description="Draw from softmax(nu h.c); None = 1 / the model's temperature."
    )
    own_temperature: ClassVar[str | None] = "nu"

    def fixes_the_temperature(self) -> bool:
        """Without its own `nu`, nu = 1 / tau at the start."""
        return self.nu is None


@register_sampler(ExactSettings)
class ExactSampler:
    """Samples from the model's true softmax; see the module docstring."""

    def __init__(self, cfg: ExactSettings, ctx: SamplerContext) -> None:
        self.per_query = cfg.per_query
        self.num_items = ctx.num_items
        self.nu = cfg.nu if cfg.nu is not None else 1.0 / ctx.temperature
        self.items: Tensor | None = None  # [n + 1, d]

    def refresh(self, item_emb: Tensor) -> None:
        """Copy the whole table `[n + 1, d]` (row 0 padding, never sampled)."""
        self.items = item_emb.detach().to(torch.float32).clone()

    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Overwrite rows `item_idx [k]` with `item_emb [k, d]`."""
        if self.items is None:
            raise RuntimeError("exact sampler: refresh() must be called before update()")
        self.items[item_idx.to(self.items.device)] = item_emb.detach().to(self.items)

    def _rows(self) -> int:
        """Query rows scored at once."""
        return max(1, _MAX_CHUNK_CELLS // max(self.num_items, 1))

    def _row_chunks(self, queries: Tensor) -> list[Tensor]:
        return list(queries.detach().to(torch.float32).split(self._rows()))

    def _built(self) -> Tensor:
        if self.items is None:
            raise RuntimeError("exact sampler: refresh() must be called before sample()")
        return self.items

    def _logits(self, q: Tensor) -> Tensor:
        """`[c, n]` logits nu h . c over items 1..n (column j is item j + 1); nu = 1 / tau."""
        items = self._built()
        scaled = q.to(items.device) * self.nu  # [c, d]: scale before the product
        return scaled @ items[1:].T

    def _log_softmax(self, q: Tensor) -> Tensor:
        """`[c, n]` log softmax over items 1..n (column j is item j + 1)."""
        return torch.log_softmax(self._logits(q), dim=1)

    def _mixture_log_probs(self, queries: Tensor) -> Tensor:
        """`[n]` log of the batch mixture `mean_r softmax_r`.

        Summed in log space (one log-softmax pass per chunk, then a log-sum-exp over the
        chunks): plain dot-product logits are unbounded, and an item's softmax entries can lie
        below float32's smallest number in every row.
        """
        parts = [torch.logsumexp(self._log_softmax(q), dim=0) for q in self._row_chunks(queries)]
        return torch.logsumexp(torch.stack(parts), dim=0) - math.log(queries.shape[0])

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw `num` ids: `[m]` from the batch mixture or `[N, m]` per query.

        `pos_log_q [N]` is `log(m q)` of each positive under the distribution its row's
        draws come from (the mixture, or the query's own softmax).
        """
        log_m = torch.log(torch.tensor(float(num)))
        pos0 = (positives.to(torch.int64) - 1).to(self._built().device)
        if not self.per_query:
            log_mix = self._mixture_log_probs(queries)
            ids0 = torch.multinomial(log_mix.exp(), num, replacement=True)
            return self._negatives(ids0, log_m + log_mix[ids0], log_m + log_mix[pos0], queries)
        ids_parts, logq_parts, pos_parts = [], [], []
        for q, p0 in zip(self._row_chunks(queries), pos0.split(self._rows()), strict=True):
            logits = self._logits(q)  # [c, n]
            probs, lse = _softmax_and_lse(logits)
            ids0 = torch.multinomial(probs, num, replacement=True)
            ids_parts.append(ids0)
            logq_parts.append(log_m + logits.gather(1, ids0) - lse)
            pos_parts.append(log_m + (logits.gather(1, p0.unsqueeze(1)) - lse)[:, 0])
        return self._negatives(
            torch.cat(ids_parts), torch.cat(logq_parts), torch.cat(pos_parts), queries
        )

    @staticmethod
    def _negatives(ids0: Tensor, log_q: Tensor, pos_log_q: Tensor, queries: Tensor) -> Negatives:
        """Negatives on the queries' device from 0-based ids (column j is item j + 1)."""
        dev = queries.device
        return Negatives(ids=(ids0 + 1).to(dev), log_q=log_q.to(dev), pos_log_q=pos_log_q.to(dev))

    def set_progress(self, fraction: float) -> None:
        """No-op: the model's softmax has no schedule."""

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw: per-query softmax rows, or the shared mixture repeated.

        Column 0 (padding) is -inf.
        """
        if self.per_query:
            body = torch.cat([self._log_softmax(q) for q in self._row_chunks(queries)])
        else:
            body = self._mixture_log_probs(queries).unsqueeze(0).expand(queries.shape[0], -1)
        pad = torch.full((body.shape[0], 1), -torch.inf, device=body.device)
        return torch.cat([pad, body], dim=1).to(queries.device)
