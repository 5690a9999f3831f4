"""Per-query negatives' logits without a `[N, m, d]` copy of their rows.

Per-query negatives give every query row n its own m items: the plain form gathers their
embeddings into `[N, m, d]` and multiplies row by row (`einsum("nd,nmd->nm")`). At a sampled
step's shapes on amazon-toys (N about 860 targets, m = 64, d = 256) that tensor is 56 MB,
written by the gather, read by the product, and its gradient of the same size written and then
summed back into the table. The step's logits, loss and backward, where that traffic sat
(not in its 14 M multiply-adds), were 40-50% of a per-query step; in this form they take 2.5x
less time (docs/benchmarks/archive/benchmarks.md, "The kernel sampler's step").

Here the m items of each row are the columns of a sparse `[N, k]` pattern over the k distinct
rows: the forward pass is a sampled dense product at that pattern (`torch.sparse.sampled_addmm`,
an SDDMM), the backward pass two sparse-dense products with the incoming gradient as the
pattern's values. Nothing of size `N m d` is made. A row may hold an item twice (draws with
replacement, and m may exceed k): the pattern holds each distinct (query, row) pair once, in
order, as a CSR tensor must (a pattern with a row's column twice broke torch's kernel once a
row held more entries than there are columns); its score is copied to every draw of it, and
the draws' gradients are summed into it. Exact to float rounding against the plain form
(tests/training/test_gathered_scores.py).

The sparse kernels run on the CPU; other devices keep the plain form, which is what a GPU does
well and where these kernels were not measured. The products are fp32 (bf16 autocast does not
reach them; the towers give both in fp32): a small part of a step's arithmetic.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor


def gathered_scores(queries: Tensor, rows: Tensor, inverse: Tensor) -> Tensor:
    """`[N, m]` scores `queries[n] . rows[inverse[n, j]]`.

    Args:
        queries: `[N, d]` query embeddings.
        rows: `[k, d]` the distinct negatives' embeddings.
        inverse: `[N, m]` int64, each query's negatives as row numbers of `rows`.

    """
    if queries.device.type != "cpu":
        return torch.einsum("nd,nmd->nm", queries, rows[inverse])
    with torch.autocast("cpu", enabled=False):
        return _SparseGathered.apply(queries, rows, inverse)


class _SparseGathered(torch.autograd.Function):
    """The sampled product and its two sparse-dense gradients (module docstring)."""

    @staticmethod
    def forward(ctx: Any, queries: Tensor, rows: Tensor, inverse: Tensor) -> Tensor:
        n, k = inverse.shape[0], rows.shape[0]
        query_of, column, slot = _distinct_pairs(inverse, k)
        starts = torch.zeros(n + 1, dtype=torch.int64, device=queries.device)
        starts[1:] = torch.bincount(query_of, minlength=n).cumsum(0)
        with warnings.catch_warnings():  # torch's note that CSR tensors are a beta feature
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            pattern = torch.sparse_csr_tensor(  # canonical by construction: not checked
                starts, column, queries.new_zeros(column.shape[0]), (n, k), check_invariants=False
            )
        scores = torch.sparse.sampled_addmm(pattern, queries, rows.T, beta=0.0).values()
        ctx.save_for_backward(queries, rows, query_of, column, slot)
        return scores[slot]  # [N, m]: a repeated item's entry, once per copy

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        queries, rows, query_of, column, slot = ctx.saved_tensors
        per_pair = grad.new_zeros(column.shape[0]).index_add_(0, slot.reshape(-1), grad.reshape(-1))
        weights = torch.sparse_coo_tensor(
            torch.stack([query_of, column]),
            per_pair,
            (queries.shape[0], rows.shape[0]),
            is_coalesced=True,
            check_invariants=False,
        )  # [N, k]: the copies of a repeated item summed into its pair
        return torch.sparse.mm(weights, rows), torch.sparse.mm(weights.t(), queries), None


def _distinct_pairs(inverse: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The distinct (query, row) pairs of `inverse [N, m]`, in (query, row) order.

    Returns:
        (query `[P]`, row `[P]` of each pair, `[N, m]` each entry's pair number).

    """
    rows_of = torch.arange(inverse.shape[0], device=inverse.device).unsqueeze(1)
    pairs, slot = torch.unique(rows_of * k + inverse, return_inverse=True)  # sorted
    return pairs // k, pairs % k, slot
