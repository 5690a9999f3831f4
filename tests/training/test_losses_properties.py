"""The property each loss's paper states, and the correction steps' contract."""

from __future__ import annotations

import math

import pytest
import torch

from training.corrections import STEP_ORDER, Batch, correct
from training.losses import get_loss
from training.sampler_settings import validate_sampler
from training.samplers import Negatives, SamplerContext, build_sampler

COUNTS = torch.tensor([0.0, 1.0, 4.0, 9.0, 16.0, 25.0, 36.0])  # items 1..6


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_ranking_gradient_is_the_one_negative_likelihood_gradient_at_log_c_minus_1() -> None:
    # Barber & Botev eq. 38-41: one uniform negative among C - 1 = 100 stands for all of
    # them, p~(c) = u_c / (u_c + 100 u_d) = sigma(s_c - s_d - log 100): the sampled softmax
    # with m = 1 and log_q = log(1 / 100) is that likelihood, the ranking loss its log sigma.
    draw = Negatives(torch.tensor([7]), torch.tensor([math.log(1 / 100)]), torch.zeros(1))
    grads = {}
    for name in ("ranking", "sampled_softmax"):
        scores = torch.tensor([1.3, 0.4], requires_grad=True)
        loss = get_loss(name)(scores[:1], scores[1:].view(1, 1), draw, torch.tensor([3]), 1.0)
        assert loss.item() == pytest.approx(-math.log(_sig(1.3 - 0.4 - math.log(100))), rel=1e-6)
        grads[name] = torch.autograd.grad(loss, scores)[0]
    torch.testing.assert_close(grads["ranking"], grads["sampled_softmax"])


@pytest.mark.parametrize("name", ["nce", "blackout"])
def test_nce_and_blackout_weigh_the_positive_by_its_own_log_q(name: str) -> None:
    ctx = SamplerContext(num_items=6, item_counts=COUNTS)
    sampler = build_sampler(validate_sampler({"name": "popularity", "alpha": 1.0}), ctx)
    torch.manual_seed(0)
    positives = torch.tensor([6, 1])
    draw = sampler.sample(torch.zeros(2, 3), positives, 4)
    # (count + 1) / 97 for one draw, times m = 4
    torch.testing.assert_close(draw.pos_log_q, torch.log(4 * torch.tensor([37.0, 2.0]) / 97))
    pos, neg = torch.tensor([0.5, -0.2]), torch.tensor([[0.1, 0.3, -0.4, 0.2]]).expand(2, -1)
    got = get_loss(name)(pos, neg, draw, positives, 1.0)
    hits = draw.ids.unsqueeze(0) == positives.unsqueeze(1)
    rows = []
    for r in range(2):
        p_logit = float(pos[r] - draw.pos_log_q[r])
        # NCE's noise ranges over every class, a draw of the positive included (eq. 30)
        kept = [j for j in range(4) if name == "nce" or not hits[r, j]]
        n_logits = [float(neg[r, j] - draw.log_q[j]) for j in kept]
        if name == "nce":
            rows.append(-math.log(_sig(p_logit)) - sum(math.log(_sig(-v)) for v in n_logits))
        else:
            z = math.exp(p_logit) + sum(math.exp(v) for v in n_logits)
            rows.append(
                -(p_logit - math.log(z)) - sum(math.log(1 - math.exp(v) / z) for v in n_logits)
            )
    assert got.item() == pytest.approx(sum(rows) / 2, rel=1e-5)


def test_bernoulli_loss_estimates_the_partition_function_without_bias() -> None:
    # eq. 22: Z~ = u_c + sum_{d in S, d != c} u_d / b_d has expectation sum_d u_d.
    ctx = SamplerContext(num_items=6, item_counts=COUNTS)
    sampler = build_sampler(validate_sampler({"name": "bernoulli"}), ctx)
    scores = torch.tensor([0.0, 0.3, -0.5, 1.0, 0.2, -0.1, 0.7])  # by item_idx
    positive = torch.tensor([2])
    torch.manual_seed(0)
    estimates = []
    for _ in range(4000):
        draw = sampler.sample(torch.zeros(1, 2), positive, 3)
        loss = get_loss("bernoulli")(scores[positive], scores[draw.ids].view(1, -1), draw,
                                     positive, 1.0)  # fmt: skip
        estimates.append(math.exp(loss.item() + float(scores[2])))
    exact = float(scores[1:].exp().sum())
    assert sum(estimates) / len(estimates) == pytest.approx(exact, rel=0.01)


def test_absolute_softmax_is_even_in_the_logits() -> None:
    draw = Negatives(torch.tensor([1, 2]), torch.tensor([0.3, -0.2]), torch.zeros(1))
    loss = get_loss("absolute_softmax")
    pos, neg = torch.tensor([0.7]), torch.tensor([[0.2, -1.1]])
    torch.testing.assert_close(
        loss(pos, neg, draw, torch.tensor([5]), 0.5), loss(-pos, -neg, draw, torch.tensor([5]), 0.5)
    )


def test_no_correction_subtracts_nothing() -> None:
    # tapas' default: log_q None, so the sampled softmax is the plain softmax over the draw.
    draw = Negatives(torch.tensor([1, 2]), None, None)
    got = get_loss("sampled_softmax")(torch.tensor([1.0]), torch.tensor([[0.0, 2.0]]), draw,
                                      torch.tensor([5]), 0.5)  # fmt: skip
    assert got.item() == pytest.approx(-2.0 + math.log(math.exp(2.0) + 1.0 + math.exp(4.0)))


def test_steps_run_once_in_the_fixed_order() -> None:
    # magnitude before temperature before log q: |(-2)| / 0.5 - log_q = 4 - 1, then masked.
    draw = Negatives(torch.tensor([3, 3, 5]), torch.ones(3), torch.full((1,), 0.25))
    batch = Batch(draw, torch.tensor([5]), 0.5)
    logits = correct(torch.tensor([-1.0]), torch.tensor([[-2.0, -2.0, 9.0]]), batch,
                     frozenset(STEP_ORDER))  # fmt: skip
    assert logits.pos.tolist() == [2.0] and logits.pos_log_q.tolist() == [0.25]
    assert logits.keep.tolist() == [[True, False, False]]
    assert logits.neg[0, 0].item() == 3.0
    assert torch.all(logits.neg[0, 1:] == torch.finfo(torch.float32).min)
    with pytest.raises(ValueError, match="unknown correction"):
        correct(torch.zeros(1), torch.zeros(1, 3), batch, frozenset({"softcap"}))
