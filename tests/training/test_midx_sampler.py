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
from training.samplers.cell_mixtures import Mixtures
from training.samplers.codebooks import Cells, fit

N_ITEMS, DIM, TAU = 40, 8, 0.5


def _sampler(counts: torch.Tensor | None = None, **settings: object):
    counts = torch.ones(N_ITEMS + 1) if counts is None else counts
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=counts, temperature=TAU)
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


@pytest.mark.parametrize("quantizer", ["residual", "product"])
def test_an_update_gives_rows_their_nearest_codewords_and_rebuilds_the_cells(quantizer) -> None:
    sampler, _, queries = _sampler(codewords=3, quantizer=quantizer)
    books, moved = sampler.books, torch.arange(1, 11)
    vectors = F.normalize(torch.randn(10, DIM), dim=1)
    sampler.update(moved, vectors)
    # brute force: the first codeword nearest the vector, then the second nearest what is left
    first = torch.cdist(vectors, books.first).argmin(1)
    rest = vectors - books.first[first] if quantizer == "residual" else vectors
    assert torch.equal(books.a[moved], first)
    assert torch.equal(books.b[moved], torch.cdist(rest, books.second).argmin(1))
    cells = sampler._index()
    for item, cell in zip(moved.tolist(), books.cell(moved).tolist(), strict=True):
        members = cells.members[cells.start[cell] : cells.start[cell] + cells.count[cell]]
        assert item in members.tolist()
    assert int(cells.count.sum()) == N_ITEMS  # every item in exactly one cell
    assert torch.isfinite(sampler.sample(queries, torch.arange(1, 6), 4).log_q).all()


@pytest.mark.parametrize("temperature", [0.01, 0.001])
def test_shared_draws_keep_a_finite_log_q_where_every_query_underflows(temperature) -> None:
    # every query points at item 1 at a low temperature; the positive lies opposite, where
    # each query's probability is about exp(-600) (zero in float32) or exp(-6000) (zero in
    # float64 too: its log q is summed in log space)
    sampler, table, _ = _sampler(codewords=8, per_query=False)
    sampler.temperature = temperature
    queries = 3 * table[1].expand(4, -1)
    opposite = int((table[1:] @ table[1]).argmin()) + 1
    neg = sampler.sample(queries, torch.full((4,), opposite), 16)
    assert torch.isfinite(neg.log_q).all() and torch.isfinite(neg.pos_log_q).all()
    assert float(neg.pos_log_q.max()) < -100  # it is that unlikely, not rounded up


def test_per_sequence_with_no_kept_position_draws_nothing() -> None:
    sampler, _, _ = _sampler(codewords=3, per_sequence=True)
    empty = torch.zeros(0, DIM)
    none = torch.zeros(0, dtype=torch.long)
    neg = sampler.sample(empty, none, 4, groups=none)
    assert neg.ids.shape == (0, 4) and neg.pos_log_q.shape == (0,)


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


def test_group_mixtures_are_the_mean_of_their_queries_laws() -> None:
    sampler, _, _ = _sampler(codewords=3, per_sequence=True)
    queries = F.normalize(torch.randn(7, DIM), dim=1)
    rows = torch.tensor([0, 1, 0, 2, 1, 0, 2])
    per_query = sampler._cells_given(queries)
    own = (per_query.logits - per_query.log_norm).exp()
    expected = torch.stack([own[rows == g].mean(0) for g in range(3)]).log()
    mixed = sampler._mixtures(queries, rows, 3)
    law = mixed.law(sampler._index())
    torch.testing.assert_close(law.logits - law.log_norm, expected, atol=1e-5, rtol=0)
    cells = sampler._index().occupied[torch.arange(7) % len(sampler._index().occupied)]
    exact = expected[rows, sampler._index().column[cells]]  # each under its query's group
    torch.testing.assert_close(mixed.log_prob(cells), exact, atol=1e-5, rtol=0)


POPULAR = torch.cat([torch.zeros(1), torch.arange(1, N_ITEMS + 1).float() ** 2])


@pytest.mark.parametrize("per_query", [True, False], ids=["per_query", "shared"])
def test_a_popularity_weighted_last_stage_draws_the_quantised_softmax_times_popularity(
    per_query: bool,
) -> None:
    sampler, _, queries = _sampler(POPULAR, codewords=3, popularity_alpha=0.75, per_query=per_query)
    books, items = sampler.books, torch.arange(1, N_ITEMS + 1)
    quantised = books.first[books.a[items]] + books.second[books.b[items]]
    logits = queries @ quantised.T / TAU + 0.75 * torch.log(POPULAR[1:] + 1)
    own = torch.log_softmax(logits, dim=1)
    expected = own if per_query else (own.exp().mean(0, keepdim=True).log()).expand_as(own)
    log_p = sampler.proposal_log_probs(queries)
    torch.testing.assert_close(log_p[:, 1:], expected, atol=1e-5, rtol=1e-5)
    counts = torch.zeros_like(log_p, dtype=torch.float64)
    for _ in range(200):
        neg = sampler.sample(queries, torch.arange(1, 6), 50)
        ids = neg.ids if per_query else neg.ids.expand(len(queries), -1)
        counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=torch.float64))
        draws = neg.ids.reshape(len(log_p) if per_query else 1, -1)
        rows = log_p if per_query else log_p[:1]
        torch.testing.assert_close(
            neg.log_q.reshape_as(draws), rows.gather(1, draws) + math.log(50)
        )
    empirical = counts / counts.sum(1, keepdim=True)
    assert float((0.5 * (empirical - log_p.exp()).abs().sum(1)).max()) < 0.04


def test_a_query_whose_normaliser_underflows_is_mixed_in_log_space() -> None:
    # the two codebooks' best codewords meet only in an empty cell, every occupied cell lies
    # about 1,000 nats below it: the factored normaliser underflows float64
    s1 = torch.tensor([[0.0, -1000.0], [0.0, 0.0]])
    s2 = torch.tensor([[0.0, -1000.0], [0.0, 0.0]])
    sizes = torch.tensor([[0.0, 2.0], [3.0, 0.0]])  # cell (0, 0) is empty
    mixed = Mixtures(s1, s2, sizes, torch.tensor([0, 0]), 1)
    per_query = (s1.unsqueeze(2) + s2.unsqueeze(1)).flatten(1) + sizes.flatten().log()
    expected = torch.log_softmax(per_query.double(), 1).exp().mean(0).log()
    occupied = torch.tensor([1, 2])
    assert torch.isfinite(mixed.mass).all()
    torch.testing.assert_close(mixed.mass[0, occupied].log(), expected[occupied], atol=1e-5, rtol=0)
