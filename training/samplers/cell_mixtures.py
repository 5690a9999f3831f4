"""The `midx` laws over cells of groups of queries: each group's mean of its queries' laws.

Query q puts mass |cell(a, b)| exp(s1[q, a] + s2[q, b]) / Z_q on cell (a, b), where s1 and s2 are
its scores against the two codebooks. The exponential factors, so a group's mean law is

    P_s(a, b) = |cell(a, b)| W_s[a, b],   W_s = (1 / L_s) sum over q in s of e1_q e2_q^T / Z_q,

one `[K1, L_s] x [L_s, K2]` product per group (e = exp of the scores shifted by their row's
maximum, in float64), and Z_q = e1_q^T N e2_q with N the cells' sizes: never a `[Q, K1 K2]`
table. Shared draws are the one group of the whole batch, per-sequence draws a group per history.

A cell whose mass underflows float64 in every query of its group can never be drawn; a positive
in such a cell still gets its exact log-probability, summed in log space over its group.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from training.samplers.codebooks import CellLaw, Cells


class Mixtures:
    """Each group's law over the K1 x K2 cells, from its queries' two rows of codebook scores."""

    def __init__(self, s1: Tensor, s2: Tensor, sizes: Tensor, rows: Tensor, count: int) -> None:
        """Mix the laws of queries `s1 [Q, K1]`, `s2 [Q, K2]` by group `rows [Q]` (0..count-1).

        `sizes [K1, K2]` are the cells' item counts.
        """
        self.s1, self.s2, self.rows = s1.double(), s2.double(), rows
        top1, top2 = self.s1.amax(1, keepdim=True), self.s2.amax(1, keepdim=True)
        e1, e2 = (self.s1 - top1).exp(), (self.s2 - top2).exp()
        self.sizes = sizes.double()
        z = ((e1 @ self.sizes) * e2).sum(1)
        self.log_z = (top1 + top2).squeeze(1) + z.log()
        self.group_size = torch.bincount(rows, minlength=count).double()
        lost = z == 0  # every occupied cell far below the two maxima: mixed in log space below
        weight = torch.where(lost, 0.0, 1.0 / (z * self.group_size[rows])).unsqueeze(1)
        first, second = _by_group(e1 * weight, rows, count), _by_group(e2, rows, count)
        self.mass = torch.bmm(first.transpose(1, 2), second).mul_(self.sizes).flatten(1)
        if bool(lost.any()):
            self._mix_in_log_space(lost)

    def _mix_in_log_space(self, lost: Tensor) -> None:
        """Add the laws of the queries `lost [Q]` marks, each computed whole in log space."""
        logits = (self.s1[lost].unsqueeze(2) + self.s2[lost].unsqueeze(1)).flatten(1)
        logits = logits + self.sizes.flatten().log()
        self.log_z[lost] = torch.logsumexp(logits, 1)
        rows = self.rows[lost]
        share = (logits - self.log_z[lost].unsqueeze(1)).exp() / self.group_size[rows].unsqueeze(1)
        self.mass.index_add_(0, rows, share)

    def law(self, cells: Cells) -> CellLaw:
        """Each group's law over the occupied cells (a cell that underflowed has logit -inf)."""
        return CellLaw.of(self.mass[:, cells.occupied].log().float())

    def log_prob(self, cell: Tensor) -> Tensor:
        """`[Q]` log P of cell `cell[q]` under the law of query q's group.

        Read from the mixed masses; where that mass underflowed, summed in log space over the
        group's queries instead.
        """
        k2 = self.s2.shape[1]
        mass = self.mass[self.rows, cell]
        out = mass.log()
        for q in torch.nonzero(mass == 0).flatten().tolist():
            members = self.rows == self.rows[q]
            a, b = divmod(int(cell[q]), k2)
            terms = self.s1[members, a] + self.s2[members, b] - self.log_z[members]
            size = self.sizes.flatten()[cell[q]].log()
            out[q] = torch.logsumexp(terms, 0) - math.log(self.group_size[self.rows[q]]) + size
        return out.float()


def _by_group(x: Tensor, rows: Tensor, count: int) -> Tensor:
    """`x [Q, K]` laid out as `[count, L, K]`, each group's rows first, zero padding after."""
    order = torch.argsort(rows, stable=True)
    sizes = torch.bincount(rows, minlength=count)
    start = torch.cumsum(sizes, 0) - sizes
    sorted_rows = rows[order]
    slot = torch.arange(len(rows), device=rows.device) - start[sorted_rows]
    width = int(sizes.max()) if len(rows) else 0
    out = x.new_zeros(count, width, x.shape[1])
    out[sorted_rows, slot] = x[order]
    return out
