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
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor

from training.sampler_settings import PerSequenceDraws, TracksTheTable
from training.samplers.base import (
    Negatives,
    SamplerContext,
    register_sampler,
    require_whole_table,
)
from training.samplers.codebooks import CellLaw, Cells, Codebooks, Quantizer, fit


class MidxSettings(TracksTheTable, PerSequenceDraws):
    """`sampler: {name: midx}`: K x K cells of two codebooks, per query by default."""

    name: Literal["midx"] = "midx"
    refits_sparse: ClassVar[bool] = True  # updates move rows between cells, never the codewords
    codewords: int = Field(64, ge=1, description="K codewords per codebook: K^2 cells.")
    quantizer: Quantizer = Field("residual", description="residual or product quantization.")
    kmeans_iters: int = Field(8, ge=0, description="Lloyd iterations of each codebook's fit.")
    kmeans_sample: int = Field(
        65536, ge=1, description="Items the codebooks are fitted on (all are then assigned)."
    )

    def fixes_the_temperature(self) -> bool:
        """Always: the quantised logits are divided by the starting temperature, kept."""
        return True


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
        require_whole_table(item_emb, self.num_items)
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

    def _cells_given(self, queries: Tensor) -> CellLaw:
        """Each query's law over the occupied cells: |cell| exp(quantised logit), normalised."""
        books, cells = self._built(), self._index()
        u = queries.detach().float().to(books.first.device) / self.temperature
        scores = (u @ books.first.T).unsqueeze(2) + (u @ books.second.T).unsqueeze(1)
        logits = scores.flatten(1).index_select(1, cells.occupied)
        return CellLaw.of(logits.add_(cells.log_sizes()[cells.occupied]))

    def _draws(
        self, law: CellLaw, rows: Tensor, positives: Tensor, num: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """`num` ids per row of `law` and their log q; each positive's under row `rows[n]`."""
        cells, books = self._index(), self._built()
        drawn = law.draw(num)
        drawn_cells = cells.occupied[drawn]
        ids = cells.pick(drawn_cells)
        log_q = law.log_prob(drawn) - cells.log_sizes()[drawn_cells] + math.log(num)
        pos_cell = books.cell(positives.to(books.a.device))
        pos = law.log_prob(cells.column[pos_cell].unsqueeze(1), rows).squeeze(1)
        pos = pos - cells.log_sizes()[pos_cell] + math.log(num)
        dev = positives.device
        return ids.to(dev), log_q.to(dev), pos.to(dev)

    @torch.no_grad()
    def sample(
        self, queries: Tensor, positives: Tensor, num: int, groups: Tensor | None = None
    ) -> Negatives:
        """`[N, m]` per query, `[m]` shared, or `[N, m]` shared by each history (`groups [N]`)."""
        law = self._cells_given(queries)
        everyone = torch.arange(len(queries), device=law.logits.device)
        if not self.per_query:
            one = torch.zeros_like(everyone)
            ids, log_q, pos = self._draws(law.mixture(one, 1), one, positives, num)
            return Negatives(ids=ids[0], log_q=log_q[0], pos_log_q=pos)
        if not self.cfg.per_sequence or groups is None:
            ids, log_q, pos = self._draws(law, everyone, positives, num)
            return Negatives(ids=ids, log_q=log_q, pos_log_q=pos)
        histories, rows = torch.unique(groups.to(everyone.device), return_inverse=True)
        ids, log_q, pos = self._draws(law.mixture(rows, len(histories)), rows, positives, num)
        return Negatives(ids=ids[rows], log_q=log_q[rows], pos_log_q=pos)

    @torch.no_grad()
    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw per query (shared: the batch's mixture), column 0 -inf."""
        law = self._cells_given(queries)
        if not self.per_query:
            one = torch.zeros(len(queries), dtype=torch.long, device=law.logits.device)
            law = law.mixture(one, 1)
        log_p = (law.logits - law.log_norm).expand(len(queries), -1)
        cells = self._index()
        cell = self._built().cell(torch.arange(1, self.num_items + 1, device=log_p.device))
        per_item = log_p[:, cells.column[cell]] - cells.log_sizes()[cell]
        return torch.cat([torch.full_like(per_item[:, :1], -math.inf), per_item], dim=1)
