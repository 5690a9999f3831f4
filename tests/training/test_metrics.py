"""Full-ranking metrics on hand-made rankings; chunked equals unchunked."""

from __future__ import annotations

import math

import pytest
import torch

from training.evaluation.metrics import UNRANKED, popularity_baseline, rank_targets, ranking_metrics


def _line_items(scores: list[float]) -> torch.Tensor:
    """A 1-d item table whose scores against the query [1.0] are `scores` (row 0 = padding)."""
    return torch.tensor([[0.0]] + [[s] for s in scores])


def test_rank_counts_strictly_higher_and_ties_pessimistically() -> None:
    items = _line_items([5.0, 3.0, 3.0, 1.0, 4.0])  # items 1..5
    q = torch.ones(3, 1)
    ranks, _ = rank_targets(q, items, torch.tensor([1, 2, 4]))
    # item 1 (5.0) is top; item 2 (3.0) is below 1 and 5 and ties item 3; item 4 is last.
    assert ranks.tolist() == [0, 3, 4]
    assert ranks.dtype == torch.int64


def test_a_nan_score_ranks_last_not_first() -> None:
    items = _line_items([5.0, float("nan"), 3.0])
    q = torch.tensor([[1.0], [float("nan")]])  # a target NaN by its item; a diverged query
    ranks, _ = rank_targets(q, items, torch.tensor([2, 1]))
    assert ranks.tolist() == [UNRANKED, UNRANKED]  # NaN compares False with every score
    assert ranking_metrics(ranks, torch.zeros(2), ks=(10,))["ndcg@10"] == 0.0  # a miss at 10


def test_exclude_removes_history_but_never_the_target() -> None:
    items = _line_items([5.0, 3.0, 3.0, 1.0, 4.0])
    q = torch.ones(2, 1)
    targets = torch.tensor([2, 2])
    as_list = [torch.tensor([1, 5]), torch.tensor([2, 3])]  # row 1 lists its own target
    ranks, _ = rank_targets(q, items, targets, exclude=as_list)
    assert ranks.tolist() == [1, 2]  # row 0: only the tie 3 remains; row 1: 1 and 5 above
    padded = torch.tensor([[1, 5], [2, 3]])
    ranks2, _ = rank_targets(q, items, targets, exclude=padded)
    assert torch.equal(ranks, ranks2)


def test_log_p_is_the_full_softmax_over_items() -> None:
    items = _line_items([2.0, 0.0, 1.0])
    ranks, log_p = rank_targets(torch.ones(1, 1), items, torch.tensor([3]), temperature=0.5)
    expected = 2.0 - math.log(math.exp(4.0) + math.exp(0.0) + math.exp(2.0))
    assert log_p.item() == pytest.approx(expected, abs=1e-5)
    assert ranks.item() == 1


def test_log_p_holds_for_logits_spread_beyond_the_exp_floor() -> None:
    """Items 100 and 1,000 logits apart (their exp clamped at -87 below the max), in chunks."""
    items = _line_items([2.0, -1000.0, 1.9, -100.0, 0.0])
    targets = torch.tensor([3, 4, 2])
    want = torch.log_softmax(items[1:, 0].double(), dim=0)[targets - 1].float()
    for chunk in (2, 5):
        _, log_p = rank_targets(torch.ones(3, 1), items, targets, item_chunk=chunk)
        torch.testing.assert_close(log_p, want)


def test_absolute_ranks_and_log_p_use_the_magnitude() -> None:
    """An absolute-softmax model's best item may have the most negative dot product."""
    items = _line_items([2.0, -3.0, 1.0])
    ranks, log_p = rank_targets(torch.ones(2, 1), items, torch.tensor([2, 1]), absolute=True)
    assert ranks.tolist() == [0, 1]  # |-3| first, then |2|
    expected = 2.0 - math.log(math.exp(2.0) + math.exp(3.0) + math.exp(1.0))
    assert log_p[1].item() == pytest.approx(expected, abs=1e-5)
    signed, _ = rank_targets(torch.ones(2, 1), items, torch.tensor([2, 1]))
    assert signed.tolist() == [2, 0]


def test_metrics_hand_worked() -> None:
    ranks = torch.tensor([0, 1, 9, 10, 50])
    log_p = torch.log(torch.tensor([0.5, 0.25, 0.1, 0.1, 0.05]))
    m = ranking_metrics(ranks, log_p, ks=(10, 100))
    assert m["recall@10"] == pytest.approx(3 / 5)
    assert m["recall@100"] == pytest.approx(1.0)
    ndcg10 = (1.0 + 1.0 / math.log2(3) + 1.0 / math.log2(11)) / 5
    assert m["ndcg@10"] == pytest.approx(ndcg10)
    assert m["mrr@10"] == pytest.approx((1.0 + 0.5 + 0.1) / 5)
    assert m["mrr@100"] == pytest.approx((1.0 + 0.5 + 0.1 + 1 / 11 + 1 / 51) / 5)
    ce = -sum(math.log(p) for p in [0.5, 0.25, 0.1, 0.1, 0.05]) / 5
    assert m["full_ce"] == pytest.approx(ce, rel=1e-6)
    assert set(m) == {f"{n}@{k}" for n in ("recall", "ndcg", "mrr") for k in (10, 100)} | {
        "full_ce"
    }


def test_chunked_equals_unchunked_and_brute_force() -> None:
    torch.manual_seed(0)
    n, d, u = 1000, 16, 37
    items = torch.nn.functional.normalize(torch.randn(n + 1, d), dim=1)
    q = torch.nn.functional.normalize(torch.randn(u, d), dim=1)
    targets = torch.randint(1, n + 1, (u,))
    hist = [torch.randint(1, n + 1, (int(k),)) for k in torch.randint(0, 30, (u,))]
    full = rank_targets(q, items, targets, 0.1, hist, item_chunk=n + 5)
    chunked = rank_targets(q, items, targets, 0.1, hist, item_chunk=97)
    assert torch.equal(full[0], chunked[0])
    torch.testing.assert_close(full[1], chunked[1], atol=1e-4, rtol=0)
    # Brute force over the whole score matrix.
    scores = q @ items[1:].T
    tgt = scores.gather(1, (targets - 1).unsqueeze(1))
    above = scores >= tgt
    for row, h in enumerate(hist):
        above[row, h - 1] = False
        above[row, targets[row] - 1] = False
    assert torch.equal(full[0], above.sum(1))
    log_p = torch.log_softmax(scores / 0.1, dim=1).gather(1, (targets - 1).unsqueeze(1))
    torch.testing.assert_close(full[1], log_p.squeeze(1), atol=1e-4, rtol=0)


@pytest.mark.parametrize("chunk", [1, 2, 3, 10])
def test_a_repeated_history_item_and_the_target_in_its_history_are_uncounted_once(
    chunk: int,
) -> None:
    items = _line_items([5.0, 3.0, 3.0, 1.0, 4.0, 6.0])  # items 1..6
    q = torch.ones(2, 1)
    targets = torch.tensor([3, 4])
    # row 0: item 1 (5.0) twice and item 3, its own target, in the history; row 1: item 6 (6.0)
    # three times and item 5 (4.0) once, its target 4 (1.0) not in it
    hist = torch.tensor([[1, 1, 3, 0], [6, 6, 5, 6]])
    ranks, _ = rank_targets(q, items, targets, 1.0, hist, item_chunk=chunk)
    # row 0 (3.0): items 2 (3.0, a tie), 5 and 6 count; row 1 (1.0): items 1, 2, 3 count
    assert ranks.tolist() == [3, 3]


def test_popularity_baseline_ranks_by_count() -> None:
    counts = torch.tensor([0.0, 10.0, 5.0, 1.0])
    m = popularity_baseline(counts, torch.tensor([1, 2, 3]), ks=(1, 2))
    assert m["recall@1"] == pytest.approx(1 / 3)
    assert m["recall@2"] == pytest.approx(2 / 3)
    excluded = popularity_baseline(counts, torch.tensor([2]), exclude=[torch.tensor([1])], ks=(1,))
    assert excluded["recall@1"] == 1.0
