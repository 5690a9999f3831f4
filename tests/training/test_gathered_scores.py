"""Per-query negatives' scores from the distinct rows equal the gathered `[N, m, d]` form."""

from __future__ import annotations

import pytest
import torch

from model.towers import ItemTower
from training.gathered_scores import gathered_scores

N, M, K, D = 60, 9, 11, 6  # few rows: a query's draws repeat items, as draws with replacement do


def _inputs(
    dtype: torch.dtype, m: int = M, k: int = K
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    queries = torch.randn(N, D, generator=gen, dtype=dtype).requires_grad_()
    rows = torch.randn(k, D, generator=gen, dtype=dtype).requires_grad_()
    inverse = torch.randint(0, k, (N, m), generator=gen)
    assert any(len(set(row.tolist())) < m for row in inverse)  # repeats within a row
    return queries, rows, inverse


def _plain(queries: torch.Tensor, rows: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    return torch.einsum("nd,nmd->nm", queries, rows[inverse])


@pytest.mark.parametrize("m, k", [(M, K), (3 * K, K), (M, 1)], ids=["m<k", "m>k", "one-row"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_scores_and_gradients_equal_the_gathered_form(dtype: torch.dtype, m: int, k: int) -> None:
    """Draws with replacement repeat items in a row; more draws than rows repeat them all."""
    queries, rows, inverse = _inputs(dtype, m, k)
    weights = torch.randn(N, m, dtype=dtype, generator=torch.Generator().manual_seed(1))
    want = _plain(queries, rows, inverse)
    got = gathered_scores(queries, rows, inverse)
    assert got.shape == (N, m)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {}
    torch.testing.assert_close(got, want, **tol)
    grads_want = torch.autograd.grad((want * weights).sum(), [queries, rows])
    grads_got = torch.autograd.grad((got * weights).sum(), [queries, rows])
    for have, expected in zip(grads_got, grads_want, strict=True):
        torch.testing.assert_close(have, expected, **tol)


def test_gradcheck() -> None:
    queries, rows, inverse = _inputs(torch.float64)
    assert torch.autograd.gradcheck(lambda q, r: gathered_scores(q, r, inverse), (queries, rows))


def test_no_tensor_of_queries_by_negatives_by_dim_is_kept_for_the_backward_pass() -> None:
    queries, rows, inverse = _inputs(torch.float32)
    sizes: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        gathered_scores(queries, rows, inverse).sum().backward()
    assert sizes and max(sizes) <= max(N * D, K * D, N * M) < N * M * D
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        _plain(queries, rows, inverse).sum().backward()
    assert max(sizes) >= N * M * D  # the plain form keeps the gathered rows: the check can fail


def test_the_item_towers_distinct_rows_are_its_normalised_lookups() -> None:
    tower = ItemTower(20, D)
    ids = torch.tensor([[3, 5, 3, 0], [7, 7, 7, 1]])
    rows, inverse = tower.distinct(ids)
    assert rows.shape == (5, D) and inverse.shape == ids.shape  # 0, 1, 3, 5, 7
    looked_up = torch.nn.functional.normalize(tower.embedding.weight[ids], dim=-1)
    torch.testing.assert_close(rows[inverse], looked_up)
    torch.testing.assert_close(tower(ids), looked_up)
    assert torch.all(tower(ids)[0, 3] == 0)  # padding rows are zeros
