"""The `midx` sampler: exact draws from the softmax over quantised scores (inverted multi-index).

Chen et al., "Adaptive Sampled Softmax with Inverted Multi-Index" (MIDX). Each item's vector is
approximated by two codewords, v_i ~ C1[a_i] + C2[b_i] (`training/samplers/codebooks.py`:
residual or product quantization), which puts it in cell (a_i, b_i) of a K x K grid. For a
query u the proposal is the softmax of the quantised logits, with the residual's stage
replaced by a uniform draw inside the cell, as the paper's fast variant does:

    q(i | u) = exp(u . (C1[a_i] + C2[b_i]) / tau) / Z(u),
    Z(u) = sum over cells (a, b) of |cell(a, b)| exp(u . (C1[a] + C2[b]) / tau).

A draw picks a cell from the K^2 cell probabilities |cell| exp(...) / Z (two [N, K] products
and an [N, K^2] table per batch, whatever n is), then an item uniformly from the cell, so
log q(i | u) = log P(cell of i | u) - log |cell of i| exactly. The codebooks are refitted at
each refresh (k-means, `refresh_every` steps); between refreshes an update moves the rows a
step touched to their nearest codewords. Draws and log q always come from the same index, so
the correction is exact whatever the index's age; its age only moves q away from the softmax.

Per query (the default) each query draws from its own q; shared, one draw from the batch's
mixture; `per_sequence`, one draw per history from the mixture of its positions' q.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import Tensor

from training.sampler_settings import PerQueryDraws, TracksTheTable
from training.samplers.base import Negatives, SamplerContext, register_sampler
from training.samplers.codebooks import Cells, Codebooks, Quantizer, fit


class MidxSettings(TracksTheTable, PerQueryDraws):
    """`sampler: {name: midx}`: K x K cells of two codebooks, per query by default."""

    name: Literal["midx"] = "midx"
    per_query: bool = Field(True, description="Per-query negatives [N, m] instead of [m].")
    per_sequence: bool = Field(
        False,
        description="With per_query: m draws per history, shared by its positions, from the "
        "mixture of their proposals; each logit corrected by that mixture's log q.",
    )
    codewords: int = Field(64, ge=1, description="K codewords per codebook: K^2 cells.")
    quantizer: Quantizer = Field("residual", description="residual or product quantization.")
    kmeans_iters: int = Field(8, ge=0, description="Lloyd iterations of each codebook's fit.")
    kmeans_sample: int = Field(
        65536, ge=1, description="Items the codebooks are fitted on (all are then assigned)."
    )

    @model_validator(mode="after")
    def _sequences_share_per_query_draws(self) -> MidxSettings:
        if self.per_sequence and not self.per_query:
            raise ValueError(
                "per_sequence shares per-query draws by history: it needs per_query: true"
            )
        return self


@register_sampler(MidxSettings)
class MidxSampler:
    """Draws from the softmax over each item's quantised score, then uniformly in its cell."""

    def __init__(self, cfg: MidxSettings, ctx: SamplerContext) -> None:
        """Remember the config; the codebooks are fitted at the first `refresh`."""
        self.cfg = cfg
        self.num_items = ctx.num_items
        self.temperature = ctx.temperature
        self.seed = ctx.seed
        self.per_query = cfg.per_query
        self.books: Codebooks | None = None
        self._cells: Cells | None = None
        self._refreshes = 0

    @torch.no_grad()
    def refresh(self, item_emb: Tensor) -> None:
        """Fit both codebooks to `item_emb [n + 1, d]` (row 0 is padding) and assign every item."""
        if item_emb.shape[0] != self.num_items + 1:
            raise ValueError(
                f"item_emb has {item_emb.shape[0]} rows, expected n + 1 = {self.num_items + 1}"
            )
        cfg, seed = self.cfg, self.seed + self._refreshes
        table = item_emb.detach().float()
        self.books = fit(
            table, cfg.codewords, cfg.kmeans_iters, cfg.quantizer, cfg.kmeans_sample, seed
        )
        self._refreshes += 1
        self._cells = None

    @torch.no_grad()
    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Rows `item_idx [k]` now hold `item_emb [k, d]`: each moves to its nearest codewords."""
        books = self._built()
        books.assign(item_idx.to(books.a.device), item_emb.detach().float(), self.cfg.quantizer)
        self._cells = None

    def set_progress(self, fraction: float) -> None:
        """No-op: the proposal has no schedule."""

    def _built(self) -> Codebooks:
        if self.books is None:
            raise RuntimeError("midx sampler used before refresh(item_emb)")
        return self.books

    def _index(self) -> Cells:
        """The cells' members under the current assignment (rebuilt after an update)."""
        if self._cells is None:
            self._cells = Cells.of(self._built(), self.num_items)
        return self._cells

    def _cell_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, K^2]` log P(cell | query): log |cell| + the cell's quantised logit, normalised."""
        books, cells = self._built(), self._index()
        u = queries.detach().float().to(books.first.device) / self.temperature
        scores = (u @ books.first.T).unsqueeze(2) + (u @ books.second.T).unsqueeze(1)
        return torch.log_softmax(scores.flatten(1) + cells.log_sizes(), dim=1)

    @staticmethod
    def _mixture(log_p: Tensor, groups: Tensor, count: int) -> Tensor:
        """`[count, K^2]` log of the mean of the rows of `log_p` in each group."""
        sums = torch.zeros(count, log_p.shape[1], device=log_p.device, dtype=torch.float64)
        sums.index_add_(0, groups, log_p.double().exp())
        sizes = torch.bincount(groups, minlength=count).unsqueeze(1)
        return (sums / sizes).log().float()

    @staticmethod
    def _draw_cells(log_p: Tensor, num: int) -> Tensor:
        """`[R, num]` cells drawn with replacement from each row's distribution (inverse CDF)."""
        cdf = torch.cumsum(log_p.double().exp(), dim=1)
        u = torch.rand(len(log_p), num, device=log_p.device, dtype=torch.float64) * cdf[:, -1:]
        return torch.searchsorted(cdf, u, right=True).clamp_max(log_p.shape[1] - 1)

    def _negatives(self, log_p: Tensor, rows: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw `num` per row of `log_p`; query n reads row `rows[n]` (ids, log q and its positive)."""
        cells, books = self._index(), self._built()
        drawn = self._draw_cells(log_p, num)
        ids = cells.pick(drawn)
        log_q = log_p.gather(1, drawn) - cells.log_sizes()[drawn] + math.log(num)
        pos_cell = books.cell(positives.to(books.a.device))
        pos = log_p[rows, pos_cell] - cells.log_sizes()[pos_cell] + math.log(num)
        dev = positives.device
        return Negatives(ids=ids.to(dev), log_q=log_q.to(dev), pos_log_q=pos.to(dev))

    @torch.no_grad()
    def sample(
        self, queries: Tensor, positives: Tensor, num: int, groups: Tensor | None = None
    ) -> Negatives:
        """`[N, m]` per query, `[m]` shared, or `[N, m]` shared by each history (`groups [N]`)."""
        log_p = self._cell_log_probs(queries)
        everyone = torch.arange(len(queries), device=log_p.device)
        if not self.per_query:
            shared = self._mixture(log_p, torch.zeros_like(everyone), 1)
            neg = self._negatives(shared, torch.zeros_like(everyone), positives, num)
            return Negatives(ids=neg.ids[0], log_q=neg.log_q[0], pos_log_q=neg.pos_log_q)
        if not self.cfg.per_sequence or groups is None:
            return self._negatives(log_p, everyone, positives, num)
        _, rows = torch.unique(groups.to(log_p.device), return_inverse=True)
        mixed = self._mixture(log_p, rows, int(rows.max()) + 1)
        neg = self._negatives(mixed, rows, positives, num)
        return Negatives(ids=neg.ids[rows], log_q=neg.log_q[rows], pos_log_q=neg.pos_log_q)

    @torch.no_grad()
    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw per query (shared: the batch's mixture), column 0 -inf."""
        log_p = self._cell_log_probs(queries)
        if not self.per_query:
            everyone = torch.zeros(len(queries), dtype=torch.long, device=log_p.device)
            log_p = self._mixture(log_p, everyone, 1).expand(len(queries), -1)
        items = torch.arange(1, self.num_items + 1, device=log_p.device)
        cell = self._built().cell(items)
        per_item = log_p[:, cell] - self._index().log_sizes()[cell]
        return torch.cat([torch.full_like(per_item[:, :1], -math.inf), per_item], dim=1)
