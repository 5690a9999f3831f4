"""The batched descent against the one-draw-at-a-time reference; the grouped bucket pick."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.training.frequency import chi2_pvalue
from training.feature_maps import QuadraticFeatures, RandomFourierFeatures
from training.kernel_tree import KernelTree, buckets, descent


def unit(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1)


def built(kernel: str, n: int, b: int, d: int = 6) -> KernelTree:
    """A tree over n random unit items; `rff-hot`: 4 frequencies of a hot kernel, so node
    estimates fall below the floor and clamping is exercised."""
    fmap = {
        "quadratic": lambda: QuadraticFeatures(d, 100.0),
        "rff": lambda: RandomFourierFeatures(d, 16, 4.0, seed=1),
        "rff-hot": lambda: RandomFourierFeatures(d, 4, 12.0, orthogonal=False, seed=3),
    }[kernel]()
    tree = KernelTree(fmap, b, floor=1e-3)
    emb = unit(n + 1, d, seed=0)
    emb[0] = 0.0
    tree.rebuild(emb)
    return tree


def reference_bucket_log_probs(tree: KernelTree, p: torch.Tensor) -> torch.Tensor:
    """`[Q, buckets]` float64 log-probability that one draw descending alone, branch by branch
    with probability s(child) / (s(left) + s(right)), ends in each bucket (written apart from
    the product code: a recursion over the levels in float64)."""
    p = p.double()
    log_node = torch.zeros(p.shape[0], 1, dtype=torch.float64)
    for level, valid in zip(tree.z[1:], tree.valid[1:], strict=True):
        s = torch.where(valid, (p @ level.double().T).clamp_min(tree.floor), 0.0)
        s = s.view(p.shape[0], -1, 2)
        branch = (s / s.sum(-1, keepdim=True)).flatten(1)
        parent = torch.arange(level.shape[0]) // 2
        log_node = log_node[:, parent] + torch.log(branch)
    return log_node


def reference_draws(tree: KernelTree, p: torch.Tensor, num: int, seed: int) -> torch.Tensor:
    """`[Q, num]` buckets, each draw descending on its own from the root (one draw at a time;
    the draws of a level are stepped together only for speed)."""
    gen = torch.Generator().manual_seed(seed)
    node = torch.zeros(p.shape[0], num, dtype=torch.long)
    for level, valid in zip(tree.z[1:], tree.valid[1:], strict=True):
        kids = torch.stack([2 * node, 2 * node + 1], -1)  # [Q, num, 2]
        raw = (level[kids] * p[:, None, None, :]).sum(-1)
        s = torch.where(valid[kids], raw.clamp_min(tree.floor), 0.0)
        right = torch.rand(node.shape, generator=gen) * s.sum(-1) >= s[..., 0]
        node = 2 * node + right.long()
    return node


@pytest.mark.parametrize("whole", [None, 0, 2])  # as planned; every level gathered; 2 whole
@pytest.mark.parametrize("kernel", ["quadratic", "rff", "rff-hot"])
def test_batched_descent_has_the_one_at_a_time_distribution(
    kernel: str, whole: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if whole is not None:  # force the split between whole levels and per-draw descent
        monkeypatch.setattr(descent, "whole_levels", lambda tree, q, c: whole)
    tree = built(kernel, n=95, b=3)  # 32 buckets (the last one short): 5 levels
    p = tree._per_query_vectors(unit(3, 6, seed=5))
    exact = reference_bucket_log_probs(tree, p)
    torch.manual_seed(7)
    forced = torch.tensor([0, 17, 31])
    leaf, log_p = descent.descend(tree, p, 30_000, forced)
    torch.testing.assert_close(log_p.double(), exact.gather(1, leaf), atol=2e-5, rtol=0)
    torch.testing.assert_close(leaf[:, -1], forced)
    ref = reference_draws(tree, p, 30_000, seed=8)
    for row in range(3):
        mine = torch.bincount(leaf[row, :-1], minlength=32).numpy()
        theirs = torch.bincount(ref[row], minlength=32).numpy()
        probs = exact[row].exp().numpy()
        assert chi2_pvalue(mine, probs) > 1e-3 and chi2_pvalue(theirs, probs) > 1e-3
        assert 0.5 * np.abs(mine - theirs).sum() / 30_000 < 0.03  # total variation


def test_the_reference_check_has_teeth() -> None:
    """A multinomial over the buckets' own clamped scores (not their paths' branch products)
    is a different distribution where estimates are clamped, and the check fails it."""
    tree = built("rff-hot", n=95, b=3)
    p = tree._per_query_vectors(unit(1, 6, seed=5))
    exact = reference_bucket_log_probs(tree, p)[0].exp().numpy()
    leaf = torch.where(tree.valid[-1], (p @ tree.z[-1].T).clamp_min(tree.floor), 0.0)[0]
    torch.manual_seed(7)
    drawn, _ = descent.descend(tree, p, 30_000)
    counts = torch.bincount(drawn[0], minlength=32).numpy()
    assert chi2_pvalue(counts, exact) > 1e-3
    assert chi2_pvalue(counts, (leaf / leaf.sum()).numpy()) < 1e-6


def test_pick_slots_follow_the_weights_and_report_their_share() -> None:
    """b = 7 (not a square: the two-step search pads), a zero slot never drawn, a fixed slot's
    share reported even where it is tiny."""
    weights = torch.tensor([[1.0, 0.0, 2.0, 1e-30, 3.0, 0.5, 0.5], [0.0] * 6 + [1.0]])
    rows = torch.tensor([0] * 40_000 + [1] * 10)
    fixed = torch.full_like(rows, -1)
    fixed[:2] = torch.tensor([3, 1])
    torch.manual_seed(3)
    slot, log_w = buckets.pick_slots(weights, rows, fixed)
    share = weights / weights.sum(1, keepdim=True)
    torch.testing.assert_close(log_w, torch.log(share[rows, slot]))
    assert slot[:2].tolist() == [3, 1] and (slot[-10:] == 6).all()
    counts = torch.bincount(slot[2:40_000], minlength=7).numpy()
    assert counts[1] == counts[3] == 0
    assert chi2_pvalue(counts[[0, 2, 4, 5, 6]], share[0, [0, 2, 4, 5, 6]].numpy()) > 1e-3


@pytest.mark.parametrize("chunk", [1 << 24, 64])  # one bin per count class; many small bins
def test_grouped_pick_equals_the_brute_force(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "CHUNK", chunk)
    tree = built("rff", n=200, b=8)
    h = unit(30, 6, seed=2)
    positives = torch.randint(1, 201, (30,), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(4)
    ids, log_p, pos = tree.sample(h, 4000, shared=False, positives=positives)
    brute = tree.log_prob_all(h)
    torch.testing.assert_close(log_p, brute.gather(1, ids), atol=1e-4, rtol=0)
    assert pos is not None
    torch.testing.assert_close(pos, brute.gather(1, positives[:, None])[:, 0], atol=1e-4, rtol=0)
    for row in (0, 29):
        counts = torch.bincount(ids[row], minlength=201).numpy()[1:]
        assert chi2_pvalue(counts, brute[row, 1:].exp().numpy()) > 1e-3


def test_a_step_without_queries_draws_nothing() -> None:
    tree, none = built("rff", n=40, b=4), torch.zeros(0, dtype=torch.long)
    for ids, log_p, pos in (
        tree.sample(unit(0, 6, seed=1), 5, False, none),
        tree.sample_grouped(unit(0, 6, seed=1), none, 5, none),
    ):
        assert ids.shape == log_p.shape == (0, 5) and pos is not None and pos.shape == (0,)
