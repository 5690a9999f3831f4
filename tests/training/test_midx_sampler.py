"""The `midx` sampler beyond the contract suite: its proposal is the softmax over quantised scores.

The suite (test_samplers_contract.py) checks its draw frequencies against its log q; these check
that the log q is the one the method states, q(i | u) proportional to
exp(u . (C1[a_i] + C2[b_i]) / tau), that it is the model's own softmax when the codebooks
reproduce every vector, and that updates and refreshes keep the cells consistent.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from training.sampler_settings import validate_sampler
from training.samplers import SamplerContext, build_sampler
from training.samplers.codebooks import Cells, fit

N_ITEMS, DIM, TAU = 40, 8, 0.5


def _sampler(**settings: object):
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=torch.ones(N_ITEMS + 1), temperature=TAU)
    sampler = build_sampler(validate_sampler({"name": "midx", **settings}), ctx)
    torch.manual_seed(0)
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    table[0] = 0.0
    sampler.refresh(table)
    queries = F.normalize(torch.randn(5, DIM), dim=1)
    return sampler, table, queries


@pytest.mark.parametrize("quantizer", ["residual", "product"])
def test_proposal_is_the_softmax_of_the_quantised_scores(quantizer: str) -> None:
    sampler, _, queries = _sampler(codewords=4, quantizer=quantizer)
    books = sampler.books
    items = torch.arange(1, N_ITEMS + 1)
    quantised = books.first[books.a[items]] + books.second[books.b[items]]
    expected = torch.log_softmax(queries @ quantised.T / TAU, dim=1)
    torch.testing.assert_close(sampler.proposal_log_probs(queries)[:, 1:], expected)


def test_with_a_codeword_per_item_the_proposal_is_the_model_softmax() -> None:
    # K >= n: k-means starts from every item and keeps them, the residuals are zero
    sampler, table, queries = _sampler(codewords=N_ITEMS, kmeans_iters=2)
    exact = torch.log_softmax(queries @ table[1:].T / TAU, dim=1)
    torch.testing.assert_close(sampler.proposal_log_probs(queries)[:, 1:], exact, atol=1e-5, rtol=0)


def test_log_q_of_a_draw_is_its_cell_probability_over_the_cell_size() -> None:
    sampler, _, queries = _sampler(codewords=3)
    neg = sampler.sample(queries, torch.arange(1, 6), 7)
    log_p = sampler.proposal_log_probs(queries)
    torch.testing.assert_close(neg.log_q, log_p.gather(1, neg.ids) + math.log(7))
    own = log_p[torch.arange(5), torch.arange(1, 6)]
    torch.testing.assert_close(neg.pos_log_q, own + math.log(7))


def test_an_update_moves_rows_to_their_nearest_codewords_and_rebuilds_the_cells() -> None:
    sampler, table, queries = _sampler(codewords=3)
    books = sampler.books
    moved = torch.tensor([2, 9])
    target = books.first[(books.a[1] + 1) % 3] + books.second[0]  # another cell's exact vector
    sampler.update(moved, target.expand(2, -1))
    cells = sampler._index()
    cell = books.cell(moved)
    assert torch.all(cell == cell[0])
    members = cells.members[cells.start[cell[0]] : cells.start[cell[0]] + cells.count[cell[0]]]
    assert set(moved.tolist()) <= set(members.tolist())
    assert int(cells.count.sum()) == N_ITEMS  # every item in exactly one cell
    assert torch.isfinite(sampler.sample(queries, torch.arange(1, 6), 4).log_q).all()


def test_cells_hold_every_item_once_and_picks_stay_in_their_cell() -> None:
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    books = fit(table, 3, 4, "residual", sample=N_ITEMS, seed=0)
    cells = Cells.of(books, N_ITEMS)
    assert sorted(cells.members.tolist()) == list(range(1, N_ITEMS + 1))
    chosen = torch.nonzero(cells.count).flatten().repeat(50)
    assert torch.equal(books.cell(cells.pick(chosen)), chosen)


def test_refits_use_a_new_seed_and_refuse_a_table_of_another_size() -> None:
    sampler, table, _ = _sampler(codewords=3)
    first = sampler.books.first.clone()
    sampler.refresh(table)
    assert not torch.equal(first, sampler.books.first)  # a new k-means start each refresh
    with pytest.raises(ValueError, match="expected n \\+ 1"):
        sampler.refresh(table[:-1])


def test_per_sequence_needs_per_query() -> None:
    with pytest.raises(ValueError, match="per_sequence"):
        validate_sampler({"name": "midx", "per_query": False, "per_sequence": True})
