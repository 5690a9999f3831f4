"""Two codebooks over the item table, as the inverted multi-index of the `midx` sampler uses them.

Each item i gets two codewords whose sum approximates its vector, v_i ~ C1[a_i] + C2[b_i]:
- `residual` quantization: C1 by k-means over the items, C2 by k-means over what C1 leaves
  (v_i - C1[a_i]);
- `product` quantization: C1 by k-means over the first half of the coordinates, C2 over the
  second half, each stored zero-padded to the full width so the sum is the concatenation.
The pair (a_i, b_i) is item i's cell of the K x K grid; `Cells` keeps the items of each cell
contiguous, so an item can be drawn uniformly from a cell in O(1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

Quantizer = Literal["residual", "product"]
_CHUNK = 1 << 16  # rows per block of the nearest-codeword search


def nearest(x: Tensor, centres: Tensor, shift: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """`[n]` index of the centre nearest to each row of `x` (squared Euclidean distance).

    With `shift = (cross [K1, K], first [n])`, the centre nearest to the residual x - C1[first]
    where cross = C1 @ centres.T, found as argmax x . c - cross[first, c] - |c|^2 / 2 without
    forming the residuals.
    """
    half_norms = 0.5 * centres.pow(2).sum(1)
    parts = []
    for i in range(0, len(x), _CHUNK):
        scores = x[i : i + _CHUNK] @ centres.T - half_norms
        if shift is not None:
            scores -= shift[0][shift[1][i : i + _CHUNK]]
        parts.append(scores.argmax(1))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long, device=x.device)


def kmeans(x: Tensor, k: int, iters: int, generator: torch.Generator) -> Tensor:
    """`[min(k, n), d]` centres of Lloyd's k-means over the rows of `x`, from k random rows.

    A centre that loses all its rows keeps its place.
    """
    start = torch.randperm(len(x), generator=generator)[:k].to(x.device)
    centres = x[start].clone()
    for _ in range(iters):
        assign = nearest(x, centres)
        sums = torch.zeros_like(centres).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=len(centres)).unsqueeze(1)
        centres = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
    return centres


@dataclass
class Codebooks:
    """Codewords `first [K1, d]`, `second [K2, d]` and each item's pair `a, b [n]` (row 0 too)."""

    first: Tensor
    second: Tensor
    a: Tensor
    b: Tensor

    @property
    def grid(self) -> tuple[int, int]:
        """(K1, K2): the cells are K1 x K2."""
        return len(self.first), len(self.second)

    def cell(self, items: Tensor) -> Tensor:
        """Each item's cell, `a * K2 + b`."""
        return self.a[items] * len(self.second) + self.b[items]

    def assign(self, items: Tensor, vectors: Tensor, quantizer: Quantizer) -> None:
        """Give rows `items` whose vectors are now `vectors` their nearest codewords."""
        nearest_first = nearest(vectors, self.first)
        self.a[items] = nearest_first
        shift = (self.first @ self.second.T, nearest_first) if quantizer == "residual" else None
        self.b[items] = nearest(vectors, self.second, shift)


def fit(
    table: Tensor, k: int, iters: int, quantizer: Quantizer, sample: int, seed: int
) -> Codebooks:
    """Codebooks of `k` codewords each over rows 1..n of `table`, fitted on `sample` of them."""
    generator = torch.Generator().manual_seed(seed)
    items = table[1:]
    fitted = items[torch.randperm(len(items), generator=generator)[:sample].to(items.device)]
    if quantizer == "product":
        half = table.shape[1] // 2
        left = kmeans(fitted[:, :half], k, iters, generator)
        right = kmeans(fitted[:, half:], k, iters, generator)
        first = torch.cat([left, left.new_zeros(len(left), table.shape[1] - half)], 1)
        second = torch.cat([right.new_zeros(len(right), half), right], 1)
    else:
        first = kmeans(fitted, k, iters, generator)
        second = kmeans(fitted - first[nearest(fitted, first)], k, iters, generator)
    rows = torch.zeros(len(table), dtype=torch.long, device=table.device)
    books = Codebooks(first, second, rows, rows.clone())
    books.assign(torch.arange(len(table), device=table.device), table, quantizer)
    return books


@dataclass
class Cells:
    """The items of each cell, contiguous: `members[start[c] : start[c] + count[c]]`.

    The laws over cells range over the occupied ones only: `occupied[j]` is column j's cell,
    `column[c]` cell c's column (-1 when it is empty), so no draw can land in an empty cell.
    Each item has a weight inside its cell (`weights [n + 1]`, float64; None: all 1): a cell's
    mass is its items' summed weight, and an item is drawn from its cell in proportion to its
    weight (uniformly when all are 1), through the running sum of the members' weights.
    """

    members: Tensor
    start: Tensor
    count: Tensor
    occupied: Tensor
    column: Tensor
    mass: Tensor
    weights: Tensor | None = None
    running: Tensor | None = None

    @classmethod
    def of(cls, books: Codebooks, num_items: int, weights: Tensor | None = None) -> Cells:
        """The cells of items 1..n under `books`, their items weighted by `weights`."""
        k1, k2 = books.grid
        cells = books.cell(torch.arange(1, num_items + 1, device=books.a.device))
        order = torch.argsort(cells, stable=True)
        count = torch.bincount(cells, minlength=k1 * k2)
        start = torch.cumsum(count, 0) - count
        occupied = torch.nonzero(count).flatten()
        column = torch.full_like(count, -1)
        column[occupied] = torch.arange(len(occupied), device=count.device)
        members = order + 1
        if weights is None:
            return cls(members, start, count, occupied, column, count.double())
        mass = torch.zeros(k1 * k2, dtype=torch.float64, device=count.device)
        mass.index_add_(0, cells, weights[1:].to(mass))
        running = torch.cumsum(weights.to(mass)[members], 0)
        return cls(members, start, count, occupied, column, mass, weights.to(mass), running)

    def log_mass(self) -> Tensor:
        """`[K1 K2]` log of each cell's mass (its size when unweighted; -inf when empty)."""
        return self.mass.log().float()

    def log_share(self, items: Tensor, cells: Tensor) -> Tensor:
        """Log of each of `items`' share of its cell `cells` (same shape): its draw's log P."""
        if self.weights is None:
            return -self.count[cells].float().log()
        return (self.weights[items].log() - self.mass[cells].log()).float()

    def pick(self, cells: Tensor) -> Tensor:
        """One item drawn from each of `cells` (any shape), in proportion to its weight."""
        u = torch.rand(cells.shape, device=cells.device, dtype=torch.float64)
        last = self.start[cells] + self.count[cells] - 1
        if self.running is None or self.weights is None:
            offset = (u * self.count[cells]).long()
            return self.members[torch.minimum(self.start[cells] + offset, last)]
        first = self.members[self.start[cells]]
        before = self.running[self.start[cells]] - self.weights[first]  # summed before the cell
        spot = torch.searchsorted(self.running, before + u * self.mass[cells], right=True)
        return self.members[torch.minimum(torch.maximum(spot, self.start[cells]), last)]


@dataclass
class CellLaw:
    """Per row, a law over C columns (cells): its logits, their log normaliser, their running sum.

    log P(j) = logits[j] - log_norm; `cdf` holds the cumulative exp(logits - max), the
    inverse-CDF draws' table, in float32 (one pass over the [R, C] table each).
    """

    logits: Tensor
    log_norm: Tensor
    cdf: Tensor

    @classmethod
    def of(cls, logits: Tensor) -> CellLaw:
        """The law of `logits [R, C]` (-inf for an impossible cell)."""
        top = logits.max(dim=1, keepdim=True).values
        cdf = torch.cumsum((logits - top).exp_(), dim=1)
        return cls(logits=logits, log_norm=top + cdf[:, -1:].log(), cdf=cdf)

    def log_prob(self, cells: Tensor, rows: Tensor | None = None) -> Tensor:
        """The log P of `cells [R, k]` under each row (or under row `rows[r]` for row r)."""
        if rows is None:
            return self.logits.gather(1, cells) - self.log_norm
        return self.logits[rows.unsqueeze(1), cells] - self.log_norm[rows]

    def draw(self, num: int) -> Tensor:
        """`[R, num]` columns drawn with replacement from each row (inverse CDF)."""
        u = torch.rand(len(self.cdf), num, device=self.cdf.device) * self.cdf[:, -1:]
        return torch.searchsorted(self.cdf, u, right=True).clamp_max(self.cdf.shape[1] - 1)
