"""Every loss on tiny hand-worked cases (values computed by hand in the comments), and the
property its paper states."""

from __future__ import annotations

import math

import pytest
import torch

from data.errors import RecsysInputError
from training.full_softmax import full_softmax_loss
from training.losses import (
    SAMPLED_LOSSES,
    UNCORRECTED,
    SampledLoss,
    binary_loss_caveat,
    get_loss,
    ranking_family,
)
from training.samplers import Negatives

E = math.e
LOG2 = math.log(2.0)


def _neg(ids, log_q, pos_log_q=None) -> Negatives:
    log_q = torch.as_tensor(log_q, dtype=torch.float32)
    if pos_log_q is None:  # the positive's own log q: irrelevant to the loss at hand
        pos_log_q = torch.zeros(1)
    return Negatives(torch.as_tensor(ids), log_q, torch.as_tensor(pos_log_q, dtype=torch.float32))


def _case(pos: float = 1.0, neg: tuple[float, float] = (0.0, 2.0), positive: int = 5, pos_lq=0.0):
    """One query, two shared negatives (ids 3, 4) with log_q = (log 2, 0); tau = 1."""
    return (
        torch.tensor([pos]),
        torch.tensor([list(neg)]),
        _neg([3, 4], [LOG2, 0.0], [pos_lq]),
        torch.tensor([positive]),
        1.0,
    )


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_sampled_softmax_subtracts_log_q_from_negatives_only() -> None:
    # -1 + log(e^1 + e^(0 - log 2) + e^(2 - 0))
    expected = -1.0 + math.log(E + 0.5 + E**2)
    assert get_loss("sampled_softmax")(*_case()).item() == pytest.approx(expected, rel=1e-6)


def test_sampled_softmax_masks_accidental_hits() -> None:
    # the negative with id 4 is the positive: dropped from the normaliser
    expected = -1.0 + math.log(E + 0.5)
    loss = get_loss("sampled_softmax")(*_case(positive=4))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_all_hits_give_zero_loss_and_finite_gradients() -> None:
    pos = torch.tensor([1.0], requires_grad=True)
    neg = torch.tensor([[0.0, 2.0]], requires_grad=True)
    for name, fn in SAMPLED_LOSSES.items():
        loss = fn(pos, neg, _neg([4, 4], [0.0, 0.0]), torch.tensor([4]), 1.0)
        grads = torch.autograd.grad(loss, [pos, neg])
        assert all(torch.isfinite(g).all() for g in grads), name
        assert torch.isfinite(loss), name
        # masked hits take no part: no gradient reaches them (NCE keeps them: its noise ranges
        # over every class, the true one included)
        assert torch.equal(grads[1], torch.zeros_like(neg)) == (name != "nce"), name
        if name in ("sampled_softmax", "absolute_softmax"):
            # only the positive is left in the normaliser: log(e^x / e^x) = 0
            assert loss.item() == pytest.approx(0.0, abs=1e-6), name


@pytest.mark.parametrize("per_query", [False, True])
def test_an_empty_draw_gives_finite_losses_with_every_step(per_query: bool) -> None:
    # bernoulli and tapas may draw no negative at all (bernoulli at m = 1: e^-1 of its steps)
    pos = torch.tensor([1.0, 0.5], requires_grad=True)
    neg = torch.zeros(2, 0, requires_grad=True)
    ids = torch.zeros(2, 0, dtype=torch.long) if per_query else torch.zeros(0, dtype=torch.long)
    empty = Negatives(ids, torch.zeros(ids.shape), torch.zeros(2))
    window = torch.tensor([[3, 4], [5, 0]])
    for name, fn in SAMPLED_LOSSES.items():
        loss = fn(pos, neg, empty, torch.tensor([3, 5]), 1.0, user_items=window)
        assert torch.isfinite(loss), name
        assert all(torch.isfinite(g).all() for g in torch.autograd.grad(loss, [pos])), name


def test_shared_and_per_query_negatives_agree() -> None:
    torch.manual_seed(0)
    pos, neg = torch.randn(3), torch.randn(3, 4)
    ids, log_q, pos_lq = torch.tensor([1, 2, 3, 2]), torch.randn(4), torch.randn(3)
    positives = torch.tensor([2, 7, 3])
    for name, fn in SAMPLED_LOSSES.items():
        shared = fn(pos, neg, Negatives(ids, log_q, pos_lq), positives, 0.5)
        rows = Negatives(ids.expand(3, -1), log_q.expand(3, -1), pos_lq)
        torch.testing.assert_close(shared, fn(pos, neg, rows, positives, 0.5), msg=name)


def test_absolute_softmax_uses_absolute_logits() -> None:
    expected = -1.0 + math.log(E + 0.5 + E**2)  # |-1| = 1, |-2| = 2
    loss = get_loss("absolute_softmax")(*_case(pos=-1.0, neg=(0.0, -2.0)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_bernoulli_counts_each_id_once_with_weight_one_over_b() -> None:
    pos, neg = torch.tensor([1.0]), torch.tensor([[0.0, 0.0, 2.0]])
    draw = _neg([3, 3, 4], torch.log(torch.tensor([0.5, 0.5, 1.0])))
    loss = get_loss("bernoulli")(pos, neg, draw, torch.tensor([9]), 1.0)
    # Z~ = e^1 + e^0 / 0.5 (id 3 once) + e^2 / 1
    assert loss.item() == pytest.approx(-1.0 + math.log(E + 2.0 + E**2), rel=1e-6)


def test_ranking_default_alpha_is_log_one_over_q() -> None:
    # m = 2, log(m q) = (log 2, 0) -> q = (1, 1/2) -> alpha = (0, log 2)
    expected = -0.5 * (math.log(_sig(1.0 - 0.0 - 0.0)) + math.log(_sig(1.0 - 2.0 - LOG2)))
    assert get_loss("ranking")(*_case()).item() == pytest.approx(expected, rel=1e-6)
    fixed = SampledLoss(ranking_family(alpha=1.0), UNCORRECTED)(*_case())
    expected_fixed = -0.5 * (math.log(_sig(0.0)) + math.log(_sig(-2.0)))
    assert fixed.item() == pytest.approx(expected_fixed, rel=1e-6)


def test_ranking_with_uniform_q_uses_log_n() -> None:
    # uniform over n = 101 items, m = 2: alpha = log(101) = log(C - 1) for C = 102 classes
    draw = _neg([1, 2], torch.full((2,), math.log(2 / 101)))
    loss = get_loss("ranking")(
        torch.tensor([3.0]), torch.tensor([[0.0, 0.0]]), draw, torch.tensor([5]), 1.0
    )
    assert loss.item() == pytest.approx(-math.log(_sig(3.0 - math.log(101))), rel=1e-5)


def test_negative_sampling_binary_terms_ignore_q() -> None:
    expected = -(math.log(_sig(1.0)) + math.log(_sig(-0.0)) + math.log(_sig(-2.0)))
    loss = get_loss("negative_sampling")(*_case())
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # Mikolov's objective ignores q: any other log q gives the same value
    other = get_loss("negative_sampling")(*_case()[:2], _neg([3, 4], [5.0, -3.0]), *_case()[3:])
    assert other.item() == pytest.approx(expected, rel=1e-6)


def test_nce_classifies_data_against_m_times_noise() -> None:
    expected = -(
        math.log(_sig(1.0 - math.log(0.5)))
        + math.log(_sig(-(0.0 - LOG2)))
        + math.log(_sig(-(2.0 - 0.0)))
    )
    loss = get_loss("nce")(*_case(pos_lq=math.log(0.5)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_nce_keeps_a_noise_draw_of_the_positive_as_its_paper_does() -> None:
    # id 4 is the positive: its draw stays a noise term (Barber & Botev eq. 30)
    expected = -(
        math.log(_sig(1.0 - math.log(0.5)))
        + math.log(_sig(-(0.0 - LOG2)))
        + math.log(_sig(-(2.0 - 0.0)))
    )
    loss = get_loss("nce")(*_case(positive=4, pos_lq=math.log(0.5)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_blackout_weighted_discriminative_objective() -> None:
    logits = [1.0 - 1.5, 0.0 - LOG2, 2.0 - 0.0]  # the positive by its own log q, 1.5
    z = sum(math.exp(v) for v in logits)
    p = [math.exp(v) / z for v in logits]
    expected = -(math.log(p[0]) + math.log(1 - p[1]) + math.log(1 - p[2]))
    loss = get_loss("blackout")(*_case(pos_lq=1.5))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_full_softmax_leaves_out_the_padding_column() -> None:
    logits = torch.tensor([[100.0, 1.0, 2.0], [100.0, 0.0, 0.0]])  # queries x the identity table
    loss = full_softmax_loss(logits, torch.eye(3), torch.tensor([1, 2]), 1.0, chunk=16)
    expected = 0.5 * ((-1.0 + math.log(E + E**2)) + math.log(2.0))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_get_loss_unknown_lists_names() -> None:
    with pytest.raises(RecsysInputError, match="sampled_softmax"):
        get_loss("softmaxx")
    assert set(SAMPLED_LOSSES) == {
        "sampled_softmax",
        "absolute_softmax",
        "bernoulli",
        "ranking",
        "negative_sampling",
        "nce",
        "blackout",
    }


def test_binary_losses_warn_outside_the_setting_where_they_learn() -> None:
    assert binary_loss_caveat("sampled_softmax", False, 64) is None
    assert binary_loss_caveat("negative_sampling", True, 8) is None  # learns there (measured)
    shared = binary_loss_caveat("negative_sampling", False, 8)
    assert shared is not None and "8 shared negatives" in shared and "per_query=true" in shared
    many = binary_loss_caveat("nce", True, 64)
    assert many is not None and "64 per-query negatives" in many
    nce = binary_loss_caveat("nce", True, 8)  # NCE did not learn there either
    assert nce is not None and "per_query=true" not in nce and "softmax-family" in nce
