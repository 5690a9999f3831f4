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

With `popularity_alpha` > 0 (our option, not the paper's) the last stage draws an item of
its cell in proportion to w_i = (count_i + 1)^alpha and a cell weighs its items' summed w, so
q(i | u) is proportional to w_i exp(u . (C1[a_i] + C2[b_i]) / tau): the model's quantised
softmax times the popularity proposal, log q exact as before.

Per query (the default) each query draws from its own q; shared, one draw from the batch's
mixture; `per_sequence`, one draw per history from the mixture of its positions' q. The
mixtures come from two small products per group, not a per-query table (`cell_mixtures`).
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
from training.samplers.cell_mixtures import Mixtures
from training.samplers.codebooks import CellLaw, Cells, Codebooks, Quantizer, fit
from training.samplers.popularity import count_weights


class MidxSettings(TracksTheTable, PerSequenceDraws):
    """`sampler: {name: midx}`: K x K cells of two codebooks, per query by default."""

    name: Literal["midx"] = "midx"
    num_negatives: int = Field(
        64, ge=1, description="m negatives per query (per batch with per_query: false)."
    )
    refits_sparse: ClassVar[bool] = True  # updates move rows between cells, never the codewords
    codewords: int = Field(64, ge=1, description="K codewords per codebook: K^2 cells.")
    quantizer: Quantizer = Field("residual", description="residual or product quantization.")
    kmeans_iters: int = Field(8, ge=0, description="Lloyd iterations of each codebook's fit.")
    kmeans_sample: int = Field(
        65536, ge=1, description="Items the codebooks are fitted on (all are then assigned)."
    )
    popularity_alpha: float = Field(
        0.0,
        ge=0.0,
        description="Draw an item of its cell in proportion to (count + 1)^alpha, a cell's "
        "weight its items' sum: 0 draws uniformly in the cell (weight: its size).",
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
        alpha = cfg.popularity_alpha
        self.weights = None if alpha == 0 else count_weights(ctx, alpha, floor=1.0)
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
            self._cells = Cells.of(self._built(), self.num_items, self.weights)
        return self._cells

    def _scores(self, queries: Tensor) -> tuple[Tensor, Tensor]:
        """Each query's scores against the two codebooks, `[N, K1]` and `[N, K2]`, over tau."""
        books = self._built()
        u = queries.detach().float().to(books.first.device) / self.temperature
        return u @ books.first.T, u @ books.second.T

    def _cells_given(self, queries: Tensor) -> CellLaw:
        """Each query's law over the occupied cells: mass exp(quantised logit), normalised."""
        cells = self._index()
        s1, s2 = self._scores(queries)
        scores = s1.unsqueeze(2) + s2.unsqueeze(1)
        logits = scores.flatten(1).index_select(1, cells.occupied)
        return CellLaw.of(logits.add_(cells.log_mass()[cells.occupied]))

    def _mixtures(self, queries: Tensor, rows: Tensor, count: int) -> Mixtures:
        """The laws of `count` groups of queries (`rows [N]`: each query's group)."""
        k1, k2 = self._built().grid
        mass = self._index().mass.view(k1, k2)
        return Mixtures(*self._scores(queries), mass, rows.to(mass.device), count)

    def _draws(self, law: CellLaw, num: int) -> tuple[Tensor, Tensor]:
        """`num` ids per row of `law` and their log q (m draws: log m added)."""
        cells = self._index()
        drawn = law.draw(num)
        drawn_cells = cells.occupied[drawn]
        ids = cells.pick(drawn_cells)
        log_q = law.log_prob(drawn) + cells.log_share(ids, drawn_cells) + math.log(num)
        return ids, log_q

    def _positives(self, items: Tensor, cell: Tensor, log_p_cell: Tensor, num: int) -> Tensor:
        """The positives' log q of m draws: `items [N]` in `cell [N]`, of log P `log_p_cell`."""
        return log_p_cell + self._index().log_share(items, cell) + math.log(num)

    @torch.no_grad()
    def sample(
        self, queries: Tensor, positives: Tensor, num: int, groups: Tensor | None = None
    ) -> Negatives:
        """`[N, m]` per query, `[m]` shared, or `[N, m]` shared by each history (`groups [N]`)."""
        dev = positives.device
        if self.per_query and (not self.cfg.per_sequence or groups is None):
            law = self._cells_given(queries)
            ids, log_q = self._draws(law, num)
            items = positives.to(law.logits.device)
            pos_cells = self._built().cell(items)
            pos = law.log_prob(self._index().column[pos_cells].unsqueeze(1)).squeeze(1)
            pos = self._positives(items, pos_cells, pos, num)
            return Negatives(ids=ids.to(dev), log_q=log_q.to(dev), pos_log_q=pos.to(dev))
        rows, count = torch.zeros(len(queries), dtype=torch.long), 1
        if self.per_query:  # per sequence: a group per history
            _, rows = torch.unique(groups, return_inverse=True)
            count = int(rows.max()) + 1 if len(rows) else 0
        mixed = self._mixtures(queries, rows, count)
        ids, log_q = self._draws(mixed.law(self._index()), num)
        items = positives.to(mixed.mass.device)
        pos_cells = self._built().cell(items)
        pos = self._positives(items, pos_cells, mixed.log_prob(pos_cells), num).to(dev)
        if not self.per_query:
            return Negatives(ids=ids[0].to(dev), log_q=log_q[0].to(dev), pos_log_q=pos)
        at = rows.to(ids.device)
        return Negatives(ids=ids[at].to(dev), log_q=log_q[at].to(dev), pos_log_q=pos)

    @torch.no_grad()
    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log q of one draw per query (shared: the batch's mixture), column 0 -inf."""
        cells = self._index()
        if self.per_query:
            law = self._cells_given(queries)
        else:
            law = self._mixtures(queries, torch.zeros(len(queries), dtype=torch.long), 1).law(cells)
        log_p = (law.logits - law.log_norm).expand(len(queries), -1)
        items = torch.arange(1, self.num_items + 1, device=log_p.device)
        cell = self._built().cell(items)
        per_item = log_p[:, cells.column[cell]] + cells.log_share(items, cell)
        return torch.cat([torch.full_like(per_item[:, :1], -math.inf), per_item], dim=1)
