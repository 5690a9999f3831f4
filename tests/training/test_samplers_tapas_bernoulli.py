"""tapas (Algorithm 1 and 2 of tapas.txt, the temperature schedule) and bernoulli specifics."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from training.annealing import annealed_temperature
from training.sampler_settings import validate_sampler
from training.samplers import SamplerContext, build_sampler
from training.samplers.bernoulli import inclusion_probabilities
from training.samplers.tapas import shard_top

N_ITEMS, DIM, BATCH = 300, 8, 16
COUNTS = torch.cat([torch.zeros(1), (torch.arange(N_ITEMS, 0, -1) ** 1.5).float()])


def _tapas(**cfg):
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone(), temperature=0.1)
    constant = {"temperature": None, "temperature_final": None}  # the model's 0.1
    sampler = build_sampler(validate_sampler({"name": "tapas", **constant, **cfg}), ctx)
    torch.manual_seed(0)
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    table[0] = 0.0
    sampler.refresh(table)
    queries = F.normalize(torch.randn(BATCH, DIM), dim=1)
    return sampler, table, queries


def _batch_score(table: torch.Tensor, queries: torch.Tensor, ids, tau: float) -> torch.Tensor:
    """The paper's sum_i exp(h_i . c / tau), in float64 as a plain sum."""
    return (queries.double() @ table[ids].double().T / tau).exp().sum(0)


@pytest.mark.parametrize("correction", ["none", "presample"])
def test_second_pass_is_exactly_the_top_m_of_the_presample(correction: str) -> None:
    sampler, table, queries = _tapas(ratio=4, correction=correction)
    neg = sampler.sample(queries, torch.tensor([1] * BATCH), 20)
    pre = neg.presample.ids
    assert pre.unique().numel() == pre.numel()  # the presample is a set
    top = pre[_batch_score(table, queries, pre, 0.1).topk(20).indices]
    assert set(neg.ids.tolist()) == set(top.tolist()) and neg.ids.numel() == 20
    if correction == "none":  # the paper's choice: nothing for the loss to subtract
        assert neg.log_q is None and neg.pos_log_q is None
    else:  # the kept ids' presample log q
        where = {int(i): k for k, i in enumerate(pre)}
        torch.testing.assert_close(neg.log_q, neg.presample.log_q[[where[int(i)] for i in neg.ids]])
        assert torch.equal(neg.pos_log_q, neg.presample.pos_log_q)


def test_presample_of_r_m_at_least_n_is_the_whole_catalogue() -> None:
    sampler, table, queries = _tapas(ratio=8)
    neg = sampler.sample(queries, torch.tensor([1] * BATCH), 50)  # 400 >= 300 items
    assert neg.presample.ids.tolist() == list(range(1, N_ITEMS + 1))
    assert torch.all(neg.presample.log_q == 0.0)
    best = _batch_score(table, queries, torch.arange(1, N_ITEMS + 1), 0.1).topk(50).indices + 1
    assert set(neg.ids.tolist()) == set(best.tolist())


def test_one_shard_is_algorithm_1_and_k_shards_keep_their_own_top() -> None:
    torch.manual_seed(3)
    scores = torch.randn(200)
    assert set(shard_top(scores, torch.zeros(200, dtype=torch.long), 30, 1).tolist()) == set(
        scores.topk(30).indices.tolist()
    )
    shard = torch.randint(0, 3, (200,))
    kept = shard_top(scores, shard, 31, 3)  # quotas 11, 10, 10
    for j, quota in enumerate((11, 10, 10)):
        mine = (shard == j).nonzero()[:, 0]
        best = mine[scores[mine].topk(quota).indices]
        assert set(kept[shard[kept] == j].tolist()) == set(best.tolist())


def test_sharded_sampler_keeps_top_m_over_k_per_shard() -> None:
    sampler, table, queries = _tapas(ratio=4, shards=4)
    neg = sampler.sample(queries, torch.tensor([1] * BATCH), 20)
    pre = neg.presample.ids
    scores = _batch_score(table, queries, pre, 0.1)
    for j in range(4):
        mine = pre[sampler.shard_of[pre] == j]
        best = mine[scores[sampler.shard_of[pre] == j].topk(min(5, mine.numel())).indices]
        assert set(neg.ids[sampler.shard_of[neg.ids] == j].tolist()) == set(best.tolist())


def test_temperature_schedule() -> None:
    assert annealed_temperature(1.0, None, "exponential", 0.7) == 1.0
    assert annealed_temperature(1.0, 0.01, "exponential", 0.0) == pytest.approx(1.0)
    assert annealed_temperature(1.0, 0.01, "exponential", 0.5) == pytest.approx(0.1)
    assert annealed_temperature(1.0, 0.01, "exponential", 1.0) == pytest.approx(0.01)
    assert annealed_temperature(1.0, 0.2, "linear", 0.5) == pytest.approx(0.6)
    assert annealed_temperature(1.0, 0.2, "linear", 3.0) == pytest.approx(0.2)  # clamped
    sampler, table, queries = _tapas(temperature=1.0, temperature_final=0.01)
    assert sampler.temperature == 1.0
    sampler.set_progress(0.5)
    assert sampler.temperature == pytest.approx(0.1)
    # the second pass scores at the current temperature
    neg = sampler.sample(queries, torch.tensor([1] * BATCH), 20)
    pre = neg.presample.ids
    top = pre[_batch_score(table, queries, pre, 0.1).topk(20).indices]
    assert set(neg.ids.tolist()) == set(top.tolist())


def test_temperature_none_is_the_models_and_the_default_anneals_to_0_05() -> None:
    sampler, _, _ = _tapas()
    assert sampler.temperature == 0.1
    default = validate_sampler({"name": "tapas"})
    assert (default.temperature, default.temperature_final) == (1.0, 0.05)


def test_bernoulli_water_filling_by_hand() -> None:
    # weights 1, 1, 8 and m = 2: s = 0.2 would give 8 s = 1.6 > 1, so item 3 is capped at 1
    # and s = (2 - 1) / (1 + 1) = 0.5 for the others.
    b = inclusion_probabilities(torch.tensor([5.0, 1.0, 1.0, 8.0]), 2)
    assert b.tolist() == [0.0, 0.5, 0.5, 1.0]
    assert inclusion_probabilities(torch.tensor([0.0, 1.0, 3.0]), 5).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("num", [1, 16, 64])
def test_bernoulli_expected_count_is_m(num: int) -> None:
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone())
    sampler = build_sampler(validate_sampler({"name": "bernoulli", "alpha": 1.0}), ctx)
    b = sampler.table(num).b
    assert float(b.sum()) == pytest.approx(num, rel=1e-9)
    torch.manual_seed(num)
    sizes = []
    for _ in range(3000):
        ids = sampler.sample(torch.zeros(2, 3), torch.tensor([1, 2]), num).ids
        assert ids.unique().numel() == ids.numel()  # no repeats
        sizes.append(ids.numel())
    sd = math.sqrt(float((b * (1 - b)).sum()) / len(sizes))  # of the mean size
    assert sum(sizes) / len(sizes) == pytest.approx(num, abs=4 * sd + 1e-9)
