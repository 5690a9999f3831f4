"""The `quadratic` and `rff` samplers: registry, log_q = log(m q), sync with the table."""

from __future__ import annotations

import math

import pytest
import torch

from training.sampler_settings import validate_sampler
from training.samplers import SAMPLERS, SamplerContext, build_sampler

N, D = 50, 8


def unit(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1)


def make(name: str, per_query: bool = False, **extra: object):
    cfg = validate_sampler({"name": name, "per_query": per_query, "leaf_size": 4, **extra})
    sampler = build_sampler(cfg, SamplerContext(N, torch.ones(N + 1), temperature=0.25))
    table = unit(N + 1, D, seed=0)
    table[0] = 0.0
    sampler.refresh(table)
    return sampler, table


def test_both_kernels_are_registered() -> None:
    assert {"quadratic", "rff"} <= set(SAMPLERS)


@pytest.mark.parametrize("name", ["quadratic", "rff"])
def test_log_q_is_log_m_times_the_proposal(name: str) -> None:
    torch.manual_seed(0)
    sampler, _ = make(name)
    h = unit(1, D, seed=1)
    neg = sampler.sample(h, torch.tensor([3]), 64)
    assert neg.ids.shape == (64,) and neg.log_q.shape == (64,)
    expected = math.log(64) + sampler.proposal_log_probs(h)[0, neg.ids]
    torch.testing.assert_close(neg.log_q, expected)
    per_query, _ = make(name, per_query=True)
    neg = per_query.sample(unit(3, D, seed=2), torch.tensor([1, 2, 3]), 16)
    assert neg.ids.shape == (3, 16) and neg.ids.min() >= 1 and neg.ids.max() <= N


def test_quadratic_proposal_is_the_kernel_distribution() -> None:
    sampler, table = make("quadratic", per_query=True, alpha=100.0)
    h = unit(4, D, seed=3)
    k = 100 * (h @ table[1:].T / 0.25) ** 2 + 1  # alpha o^2 + 1 on the logit o = h.c / tau
    log_q = sampler.proposal_log_probs(h)
    torch.testing.assert_close(log_q[:, 1:].exp(), k / k.sum(1, keepdim=True))
    assert sampler.tree is not None and sampler.tree.b == 9  # ceil((8^2 + 1) / 8) > leaf_size 4


def test_shared_proposal_is_the_batch_summed_kernel() -> None:
    sampler, table = make("quadratic")
    h = unit(3, D, seed=4)
    k = (100 * (h @ table[1:].T / 0.25) ** 2 + 1).sum(0)  # sum_b K(h_b, c_j)
    rows = sampler.proposal_log_probs(h)
    torch.testing.assert_close(rows[:, 1:].exp(), (k / k.sum()).expand(3, -1))


@pytest.mark.parametrize("name", ["quadratic", "rff"])
def test_log_q_describes_the_tree_as_it_was_when_drawn(name: str) -> None:
    torch.manual_seed(1)
    sampler, table = make(name)
    h = unit(1, D, seed=5)
    before = sampler.proposal_log_probs(h)
    neg = sampler.sample(h, torch.tensor([1]), 32)
    sampler.update(torch.arange(1, 26), unit(25, D, seed=6))
    after = sampler.proposal_log_probs(h)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(neg.log_q, math.log(32) + before[0, neg.ids])


def test_update_moves_mass_to_the_changed_item() -> None:
    """Planted: item 7 becomes the query itself, so the quadratic kernel peaks there."""
    sampler, _ = make("quadratic", per_query=True, alpha=1000.0)
    h = unit(1, D, seed=7)
    base = sampler.proposal_log_probs(h)[0, 7].exp()
    sampler.update(torch.tensor([7]), h)
    moved = sampler.proposal_log_probs(h)[0, 7].exp()
    assert moved > 5 * base and moved > 0.05


def test_rff_with_nu_near_inverse_temperature_tracks_the_softmax() -> None:
    """The RFF proposal is closer to the model softmax than uniform, more so as D grows."""
    table = unit(N + 1, D, seed=0)
    h = unit(16, D, seed=8)
    log_p = torch.log_softmax(h @ table[1:].T / 0.25, dim=-1)
    kls = []
    for features in (4, 1024):
        sampler, _ = make("rff", per_query=True, features=features, nu=4.0)
        log_q = sampler.proposal_log_probs(h)[:, 1:]
        kls.append(float((log_p.exp() * (log_p - log_q)).sum(1).mean()))
    uniform = float((log_p.exp() * (log_p + math.log(N))).sum(1).mean())
    assert kls[1] < 0.05 < uniform and kls[1] < kls[0]


def test_errors_before_refresh_and_on_wrong_table() -> None:
    cfg = validate_sampler({"name": "rff"})
    sampler = build_sampler(cfg, SamplerContext(N, torch.ones(N + 1)))
    with pytest.raises(RuntimeError, match="refresh"):
        sampler.sample(unit(1, D, seed=0), torch.tensor([1]), 4)
    with pytest.raises(ValueError, match="n \\+ 1"):
        sampler.refresh(unit(N, D, seed=0))


def test_rff_frequencies_follow_the_runs_seed() -> None:
    """`train.seed` (the context's seed) draws the frequencies: equal seeds, equal proposals."""
    table, h = unit(N + 1, D, seed=0), unit(4, D, seed=8)
    proposals = []
    for seed in (42, 42, 43):
        ctx = SamplerContext(N, torch.ones(N + 1), temperature=0.25, seed=seed)
        cfg = validate_sampler({"name": "rff", "leaf_size": 4, "features": 16})
        sampler = build_sampler(cfg, ctx)
        sampler.refresh(table)
        proposals.append(sampler.proposal_log_probs(h))
    assert torch.equal(proposals[0], proposals[1])
    assert not torch.allclose(proposals[0], proposals[2], atol=1e-3)
