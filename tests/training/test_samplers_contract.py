"""Contract suite run over EVERY registered sampler, plus a few sampler-specific checks.

The frequency test is the one that matters: over many draws with fixed queries and table,
the empirical count of each id in the random draw (`Negatives.draw`: the draw itself, or a
two-pass sampler's first pass) must match the expected count the sampler reports as
exp(log_q), both in shape (total-variation distance) and in scale (the expected counts of
all ids sum to the number of slots drawn).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from data.errors import RecsysInputError
from tests.training.device import TEST_DEVICE as DEVICE
from training.config_loading import load_config
from training.sampler_settings import SETTINGS, validate_sampler
from training.samplers import SAMPLERS, NegativeSampler, SamplerContext, build_sampler

N_ITEMS, DIM, BATCH, NUM = 20, 6, 8, 12
TRIALS = 600
COUNTS = torch.cat([torch.zeros(1), torch.arange(1, N_ITEMS + 1, dtype=torch.float32)])


def _setup(name: str, per_query: bool, seed: int = 0, per_sequence: bool = False):
    torch.manual_seed(seed)
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone(), temperature=0.5)
    # midx with 3 codewords: 9 cells of several items, so draws inside a cell are exercised too
    every = {"per_query": per_query, "leaf_size": 4, "features": 64, "ratio": 1.5, "codewords": 3}
    every |= {"per_sequence": True} if per_sequence else {}
    own = {key: value for key, value in every.items() if key in SETTINGS[name].model_fields}
    cfg = validate_sampler({"name": name, "num_negatives": NUM, **own})  # shared-only: no per_query
    sampler = SAMPLERS[name](cfg, ctx)
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    table[0] = 0.0
    sampler.refresh(table.to(DEVICE))
    queries = F.normalize(torch.randn(BATCH, DIM), dim=1)
    return sampler, queries.to(DEVICE)


def _positives() -> torch.Tensor:
    """Positives drawn from the data distribution (what in-batch sampling assumes)."""
    return torch.multinomial(COUNTS / COUNTS.sum(), BATCH, replacement=True).to(DEVICE)


def _width_ok(name: str, width: int) -> bool:
    """Slots per row: fixed, or (a Bernoulli sample, tapas' top m) varying per draw."""
    if name == "bernoulli":
        return 1 <= width <= N_ITEMS
    if name == "tapas":
        return 1 <= width <= NUM
    return width == {"in-batch": BATCH, "mixed": BATCH + NUM}.get(name, NUM)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_has_the_whole_protocol(name: str) -> None:
    sampler, _ = _setup(name, per_query=False)
    missing = [
        member
        for member in (
            "per_query",
            "sample",
            "proposal_log_probs",
            "update",
            "refresh",
            "set_progress",
        )  # fmt: skip
        if not hasattr(sampler, member)
    ]
    assert not missing, f"{name} lacks {missing}"
    assert isinstance(sampler, NegativeSampler)


@pytest.mark.parametrize("per_query", [False, True], ids=["shared", "per_query"])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_shapes_dtypes_and_range(name: str, per_query: bool) -> None:
    sampler, queries = _setup(name, per_query)
    positives = _positives()
    neg = sampler.sample(queries, positives, NUM)
    for part in (neg, neg.draw):
        assert part.ids.dtype == torch.int64 and part.ids.device == DEVICE
        assert int(part.ids.min()) >= 1 and int(part.ids.max()) <= N_ITEMS
        if part.log_q is not None:
            assert part.log_q.dtype == torch.float32 and part.ids.shape == part.log_q.shape
            assert part.log_q.device == DEVICE and part.pos_log_q.device == DEVICE
            assert torch.isfinite(part.log_q).all()
            assert part.pos_log_q.shape == positives.shape and torch.isfinite(part.pos_log_q).all()
    assert neg.draw.log_q is not None  # the random draw always reports its log q
    assert neg.ids.dim() == (2 if sampler.per_query else 1)
    if sampler.per_query:
        assert neg.ids.shape[0] == BATCH
    assert _width_ok(name, neg.ids.shape[-1])


@pytest.mark.parametrize("per_query", [False, True], ids=["shared", "per_query"])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_frequencies_match_log_q(name: str, per_query: bool) -> None:
    sampler, queries = _setup(name, per_query, seed=1)
    rows = BATCH if sampler.per_query else 1
    counts = torch.zeros(rows, N_ITEMS + 1, dtype=torch.float64)
    q_sum = torch.zeros(rows, N_ITEMS + 1, dtype=torch.float64)
    seen = torch.zeros(rows, N_ITEMS + 1, dtype=torch.float64)
    slots = 0.0
    for _ in range(TRIALS):
        draw = sampler.sample(queries, _positives(), NUM).draw
        ids = draw.ids.reshape(rows, -1).cpu()
        expected = draw.log_q.reshape(rows, -1).double().exp().cpu()
        ones = torch.ones_like(expected)
        counts.scatter_add_(1, ids, ones)
        q_sum.scatter_add_(1, ids, expected)
        seen.scatter_add_(1, ids, ones)
        slots += ids.shape[1] / TRIALS
    expected_count = torch.where(seen > 0, q_sum / seen.clamp_min(1), torch.zeros_like(q_sum))
    # Scale: the expected counts of every id (nearly all are seen) add up to the slots.
    totals = expected_count.sum(1)
    assert torch.all(totals > 0.97 * slots) and torch.all(totals < 1.02 * slots), totals
    # Shape: total-variation distance between empirical and reported distributions.
    empirical = counts / counts.sum(1, keepdim=True)
    reported = expected_count / expected_count.sum(1, keepdim=True)
    tv = 0.5 * (empirical - reported).abs().sum(1)
    assert float(tv.max()) < 0.06, tv


SHARE_BY_HISTORY = sorted(n for n, cls in SETTINGS.items() if "per_sequence" in cls.model_fields)


@pytest.mark.parametrize("name", SHARE_BY_HISTORY)
def test_draws_shared_by_history_match_the_log_q_of_their_mixture(name: str) -> None:
    """per_sequence: a history's positions share its draws and report the same log q, and the
    draws' frequencies match it as every sampler's own draws do."""
    sampler, queries = _setup(name, per_query=True, seed=2, per_sequence=True)
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2], device=DEVICE)  # three histories
    counts = torch.zeros(3, N_ITEMS + 1, dtype=torch.float64)
    q_sum = torch.zeros(3, N_ITEMS + 1, dtype=torch.float64)
    draws = 5 * NUM  # per history: TRIALS / 4 calls of 60 draws
    for _ in range(TRIALS // 4):
        neg = sampler.sample(queries, _positives(), draws, groups=groups)
        first = torch.tensor([0, 3, 5], device=DEVICE)  # each history's first position
        assert torch.equal(neg.ids, neg.ids[first][groups])
        assert torch.equal(neg.log_q, neg.log_q[first][groups])
        ids, expected = neg.ids[first].cpu(), neg.log_q[first].double().exp().cpu()
        counts.scatter_add_(1, ids, torch.ones_like(expected))
        q_sum.scatter_add_(1, ids, expected)
    expected_count = q_sum / counts.clamp_min(1)
    totals = expected_count.sum(1)
    assert torch.all(totals > 0.97 * draws) and torch.all(totals < 1.02 * draws), totals
    empirical = counts / counts.sum(1, keepdim=True)
    reported = expected_count / expected_count.sum(1, keepdim=True)
    assert float((0.5 * (empirical - reported).abs().sum(1)).max()) < 0.06


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_proposal_log_probs_is_a_distribution(name: str) -> None:
    sampler, queries = _setup(name, per_query=True)
    log_p = sampler.proposal_log_probs(queries)
    assert log_p.shape == (BATCH, N_ITEMS + 1) and log_p.device == DEVICE
    assert torch.all(log_p[:, 0] == -math.inf)
    torch.testing.assert_close(
        torch.logsumexp(log_p.double(), dim=1),
        torch.zeros(BATCH, dtype=torch.float64, device=DEVICE),
        atol=1e-4,
        rtol=0,
    )


def test_uniform_log_q_is_log_m_over_n() -> None:
    sampler, queries = _setup("uniform", per_query=False)
    neg = sampler.sample(queries, _positives(), NUM)
    expected = torch.full((NUM,), math.log(NUM / N_ITEMS), device=DEVICE)
    torch.testing.assert_close(neg.log_q, expected)


def test_popularity_log_q_hand_worked() -> None:
    counts = torch.tensor([0.0, 0.0, 3.0, 8.0])  # weights (c + 1)^0.5 = 1, 2, 3
    ctx = SamplerContext(num_items=3, item_counts=counts)
    cfg = validate_sampler({"name": "popularity", "alpha": 0.5, "floor": 1.0})
    neg = build_sampler(cfg, ctx).sample(torch.zeros(2, 4), torch.tensor([1, 2]), 10)
    expected = torch.log(10 * torch.tensor([0.0, 1.0, 2.0, 3.0]) / 6.0)[neg.ids]
    torch.testing.assert_close(neg.log_q, expected.float())


def test_in_batch_returns_positives_with_popularity_log_q() -> None:
    counts = torch.tensor([0.0, 1.0, 3.0])  # p = 1/4, 3/4
    ctx = SamplerContext(num_items=2, item_counts=counts)
    sampler = build_sampler(validate_sampler({"name": "in-batch"}), ctx)
    pos = torch.tensor([2, 1, 2, 2])
    neg = sampler.sample(torch.zeros(4, 3), pos, 999)
    assert torch.equal(neg.ids, pos)
    torch.testing.assert_close(neg.log_q, torch.log(torch.tensor([3.0, 1.0, 3.0, 3.0])))


def test_an_item_never_trained_on_is_never_an_in_batch_slot_of_mixed() -> None:
    counts = torch.tensor([0.0, 1.0, 3.0, 0.0])  # item 3: no training count, never a positive
    ctx = SamplerContext(num_items=3, item_counts=counts)
    cfg = validate_sampler({"name": "mixed", "alpha": 0.0, "num_negatives": 4})
    neg = build_sampler(cfg, ctx).sample(torch.zeros(8, 3), torch.tensor([2] * 8), 4)
    # expected count in the combined draw: 8 p_i + 4 q_i, q uniform over the three items
    want = torch.log(8 * torch.tensor([0.0, 0.25, 0.75, 0.0]) + 4 / 3)[neg.ids]
    torch.testing.assert_close(neg.log_q, want.float())
    in_batch = build_sampler(validate_sampler({"name": "in-batch"}), ctx)
    proposal = in_batch.proposal_log_probs(torch.zeros(2, 3))
    torch.testing.assert_close(proposal.exp().sum(1), torch.ones(2))  # a distribution


def test_exact_sampler_follows_update() -> None:
    sampler, queries = _setup("exact", per_query=True)
    q0 = queries[:1]
    table_row = q0.clone()
    sampler.update(torch.tensor([7], device=DEVICE), table_row)  # item 7 now equals the query
    sampler.nu = 50.0  # softmax nearly one-hot on item 7
    neg = sampler.sample(q0, torch.tensor([1], device=DEVICE), 200)
    assert (neg.ids == 7).float().mean() > 0.95


def test_exact_sampler_nu_draws_from_the_tempered_softmax() -> None:
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone(), temperature=0.5)
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    queries = F.normalize(torch.randn(BATCH, DIM), dim=1)
    model, tempered = (
        build_sampler(validate_sampler({"name": "exact", "nu": nu}), ctx) for nu in (None, 7.0)
    )
    for sampler in (model, tempered):
        sampler.refresh(table)
    scores = queries @ table[1:].T
    torch.testing.assert_close(
        model.proposal_log_probs(queries)[:, 1:], (scores / 0.5).log_softmax(1)
    )
    torch.testing.assert_close(
        tempered.proposal_log_probs(queries)[:, 1:], (7 * scores).log_softmax(1)
    )


def test_exact_per_query_log_q_is_the_log_softmax_where_the_softmax_underflows() -> None:
    """Unnormalised logits spread over hundreds: about 40% of the softmax is 0 in float32."""
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone(), temperature=1.0)
    sampler = build_sampler(validate_sampler({"name": "exact"}), ctx)
    gen = torch.Generator().manual_seed(5)
    table = 30 * torch.randn(N_ITEMS + 1, DIM, generator=gen)
    queries = torch.randn(BATCH, DIM, generator=gen)
    log_p = math.log(16) + (queries @ table[1:].T).log_softmax(1)  # [B, n], item j at j - 1
    positives = log_p.argmin(1) + 1  # each row's least likely item
    assert (log_p.gather(1, positives[:, None] - 1).exp() == 0).any()  # some underflow
    sampler.refresh(table.to(DEVICE))
    neg = sampler.sample(queries.to(DEVICE), positives.to(DEVICE), 16)
    torch.testing.assert_close(neg.log_q.cpu(), log_p.gather(1, neg.ids.cpu() - 1))
    torch.testing.assert_close(neg.pos_log_q.cpu(), log_p.gather(1, positives[:, None] - 1)[:, 0])
    assert torch.isfinite(neg.pos_log_q).all()


def test_an_unknown_sampler_name_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(RecsysInputError, match="sampler.name: unknown sampler 'nope'.*uniform"):
        load_config(overrides=["sampler.name=nope"])


@pytest.mark.parametrize("per_query", [False, True], ids=["shared", "per_query"])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_pos_log_q_is_what_the_proposal_gives_the_positive(name: str, per_query: bool) -> None:
    # pos_log_q = log(expected draw size) + log q(positive) of one draw, on every row with the
    # same offset; where a row's positive was drawn, its slot reports the same number.
    sampler, queries = _setup(name, per_query, seed=2)
    positives = _positives()
    one = sampler.proposal_log_probs(queries).gather(1, positives.unsqueeze(1))[:, 0]
    hits = 0
    for _ in range(5):
        draw = sampler.sample(queries, positives, NUM).draw
        offset = draw.pos_log_q - one
        torch.testing.assert_close(offset, offset[:1].expand_as(offset), atol=1e-4, rtol=0)
        ids = draw.ids if draw.ids.dim() == 2 else draw.ids.expand(BATCH, -1)
        log_q = draw.log_q if draw.log_q.dim() == 2 else draw.log_q.expand(BATCH, -1)
        hit = ids == positives.unsqueeze(1)
        torch.testing.assert_close(
            log_q[hit], draw.pos_log_q[hit.nonzero()[:, 0]], atol=1e-4, rtol=0
        )
        hits += int(hit.sum())
    assert hits > 0
