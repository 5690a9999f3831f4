"""The kernel tree: exact distribution, draw frequencies, log-probs, updates, clamping, memory."""

from __future__ import annotations

import pytest
import torch

from tests.training import frequency
from training.feature_maps import QuadraticFeatures, RandomFourierFeatures
from training.kernel_tree import KernelTree


def unit(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1)


def table(n: int, d: int, seed: int = 0) -> torch.Tensor:
    emb = unit(n + 1, d, seed=seed)
    emb[0] = 0.0
    return emb


def quadratic_kernel(h: torch.Tensor, emb: torch.Tensor, alpha: float) -> torch.Tensor:
    """`[B, n]` K(h_b, c_j) = alpha (h_b . c_j)^2 + 1 over items 1..n."""
    return alpha * (h @ emb[1:].T) ** 2 + 1


def brute_quadratic(h: torch.Tensor, emb: torch.Tensor, alpha: float) -> torch.Tensor:
    k = quadratic_kernel(h, emb, alpha)
    return k / k.sum(-1, keepdim=True)


def chi2_pvalue(ids: torch.Tensor, probs: torch.Tensor) -> float:
    """Chi-square of draw counts against `probs [n + 1]`, merging bins expected below 5."""
    counts = torch.bincount(ids.flatten(), minlength=probs.numel()).double().numpy()
    return frequency.chi2_pvalue(counts, probs.double().numpy())


@pytest.mark.parametrize(("n", "b"), [(37, 5), (64, 8), (3, 8), (1, 4), (100, 1)])
def test_quadratic_tree_equals_brute_force(n: int, b: int) -> None:
    emb, h = table(n, 6), unit(4, 6, seed=1)
    tree = KernelTree(QuadraticFeatures(6, 100.0), b)
    tree.rebuild(emb)
    log_p = tree.log_prob_all(h)
    assert torch.isneginf(log_p[:, 0]).all()
    torch.testing.assert_close(log_p[:, 1:].exp(), brute_quadratic(h, emb, 100.0))
    summed = quadratic_kernel(h, emb, 100.0).sum(0)  # shared draws: q ~ sum_b K(h_b, c)
    shared = tree.log_prob_all(h, shared=True)[0, 1:].exp()
    torch.testing.assert_close(shared, summed / summed.sum())


def test_tree_levels_and_memory_are_bucket_sized() -> None:
    n, b, d = 1000, 10, 4
    tree = KernelTree(QuadraticFeatures(d, 1.0), b)
    tree.rebuild(table(n, d))
    assert [z.shape[0] for z in tree.z] == [1, 2, 4, 8, 14, 26, 50, 100]
    nodes = sum(z.shape[0] for z in tree.z)
    assert nodes <= 2 * (n // b) + tree.depth
    assert tree.memory_bytes() == 4 * (nodes * (d * d + 1) + (n + 1) * d)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("kernel", ["quadratic", "rff"])
def test_draw_frequencies_match_log_probs_before_and_after_update(
    kernel: str, shared: bool
) -> None:
    torch.manual_seed(0)
    n, d, b = 45, 8, 4
    fmap = (
        QuadraticFeatures(d, 100.0) if kernel == "quadratic" else RandomFourierFeatures(d, 32, 4.0)
    )
    emb, h = table(n, d), unit(3, d, seed=2)
    tree = KernelTree(fmap, b)
    tree.rebuild(emb)
    for stage in ("before", "after"):
        ids, log_p, _ = tree.sample(h, 60_000 if shared else 20_000, shared=shared)
        expected = tree.log_prob_all(h, shared=shared)
        if shared:
            assert ids.shape == (60_000,)
            torch.testing.assert_close(log_p, expected[0, ids])
            assert chi2_pvalue(ids, expected[0].exp()) > 1e-3, stage
        else:
            assert ids.shape == (3, 20_000)
            torch.testing.assert_close(log_p, expected.gather(1, ids))
            for row in range(3):
                assert chi2_pvalue(ids[row], expected[row].exp()) > 1e-3, (stage, row)
        assert (ids >= 1).all() and (ids <= n).all()
        tree.update(torch.tensor([1, 7, 45, 44, 20]), unit(5, d, seed=3))


def test_chi_square_detects_a_wrong_distribution() -> None:
    """The frequency check has teeth: dropping the in-bucket term is caught."""
    torch.manual_seed(0)
    n, d = 40, 6
    tree = KernelTree(QuadraticFeatures(d, 100.0), 8)
    tree.rebuild(table(n, d))
    h = unit(1, d, seed=4)
    ids, _, _ = tree.sample(h, 40_000, shared=True)
    right = tree.log_prob_all(h)[0].exp()
    wrong = right.clone()
    wrong[1:] = right[1:].view(5, 8).sum(1, keepdim=True).expand(5, 8).flatten() / 8
    assert chi2_pvalue(ids, right) > 1e-3
    assert chi2_pvalue(ids, wrong) < 1e-6


def test_incremental_updates_equal_a_full_rebuild() -> None:
    n, d = 203, 5
    emb = table(n, d)
    for fmap in (QuadraticFeatures(d, 100.0), RandomFourierFeatures(d, 16, 2.0)):
        tree = KernelTree(fmap, 6)
        tree.rebuild(emb)
        changed = emb.clone()
        for step, rows in enumerate([30, 30, 30, 400, 30]):  # 400 draws: over n / 2 distinct
            idx = torch.randint(1, n + 1, (rows,), generator=torch.Generator().manual_seed(step))
            new = unit(rows, d, seed=10 + step)
            tree.update(idx, new)
            for row, vector in zip(idx.tolist(), new, strict=True):
                changed[row] = vector  # last occurrence wins, as in update
        fresh = KernelTree(fmap, 6)
        fresh.rebuild(changed)
        torch.testing.assert_close(tree.items, fresh.items)
        for mine, ref in zip(tree.z, fresh.z, strict=True):
            torch.testing.assert_close(mine, ref, atol=1e-4, rtol=1e-4)
        h = unit(2, d, seed=9)
        torch.testing.assert_close(tree.log_prob_all(h), fresh.log_prob_all(h), atol=1e-4, rtol=0)


def test_an_update_re_sums_only_the_touched_buckets_and_their_ancestors() -> None:
    """Bucket 0 (3 of its 8 rows changed: re-summed from its rows) and bucket 5 (1 row: its
    phi delta) equal a rebuild's; every node off their paths keeps its sums bit for bit."""
    n, d, b = 64, 5, 8
    emb = table(n, d)
    tree = KernelTree(RandomFourierFeatures(d, 16, 2.0), b)
    tree.rebuild(emb)
    before = [z.clone() for z in tree.z]
    idx = torch.tensor([1, 2, 3, 44, 2])  # a repeated id takes its last row
    new = unit(5, d, seed=11)
    mapped, cos_sin = [], tree.fmap._cos_sin
    tree.fmap._cos_sin = lambda x: (mapped.append(x.shape[:-1].numel()), cos_sin(x))[1]
    tree.update(idx, new)
    assert sum(mapped) == 8 + 2  # bucket 0 re-summed (8 rows); bucket 5: its row, old and new
    changed = emb.clone()
    changed[idx[[0, 2, 3, 4]]] = new[[0, 2, 3, 4]]
    fresh = KernelTree(tree.fmap, b)
    fresh.rebuild(changed)
    for level, (mine, ref, old) in enumerate(zip(tree.z, fresh.z, before, strict=True)):
        torch.testing.assert_close(mine, ref, atol=1e-5, rtol=1e-5)
        on_path = {0 >> (tree.depth - level), 5 >> (tree.depth - level)}
        off = [i for i in range(old.shape[0]) if i not in on_path]
        assert torch.equal(mine[off], old[off]), level
        assert not torch.equal(mine[sorted(on_path)], old[sorted(on_path)]), level


def test_update_rejects_padding_row() -> None:
    tree = KernelTree(QuadraticFeatures(3, 1.0), 2)
    tree.rebuild(table(5, 3))
    with pytest.raises(IndexError):
        tree.update(torch.tensor([0]), unit(1, 3, seed=0))


def test_clamped_rff_scores_still_report_the_procedure_probability() -> None:
    """Few frequencies and a hot kernel make signed node estimates fall below the floor."""
    torch.manual_seed(1)
    n, d = 64, 8
    fmap = RandomFourierFeatures(d, 4, 12.0, orthogonal=False, seed=3)
    tree = KernelTree(fmap, 2, floor=1e-3)
    tree.rebuild(table(n, d))
    h = unit(1, d, seed=5)
    p = tree._per_query_vectors(h)
    raw = torch.cat([p @ z.T for z in tree.z[1:]], dim=1)
    assert (raw < 1e-3).any()  # clamping is exercised, not hypothetical
    log_p = tree.log_prob_all(h)[0]
    torch.testing.assert_close(log_p[1:].exp().sum(), torch.tensor(1.0))
    ids, log_draw, _ = tree.sample(h, 50_000, shared=True)
    torch.testing.assert_close(log_draw, log_p[ids])
    assert chi2_pvalue(ids, log_p.exp()) > 1e-3


def test_few_draws_per_query_use_the_gather_path_and_stay_exact() -> None:
    """With m small, a lone query's deep levels (shared draws: one row) are descended draw by
    draw, gathering children; a step's many queries score every level whole. Both exact."""
    torch.manual_seed(2)
    n, d = 300, 6
    tree = KernelTree(QuadraticFeatures(d, 100.0), 3)  # 100 buckets: levels wider than 2 m
    tree.rebuild(table(n, d))
    h = unit(1, d, seed=6)
    expected = tree.log_prob_all(h)[0]
    ids, log_p, _ = tree.sample(h.expand(15_000, d), 2, shared=False)
    torch.testing.assert_close(log_p, expected[ids])
    assert chi2_pvalue(ids, expected.exp()) > 1e-3
    shared = [tree.sample(h, 2, shared=True)[:2] for _ in range(2000)]
    ids = torch.cat([s[0] for s in shared])
    torch.testing.assert_close(torch.cat([s[1] for s in shared]), expected[ids])
    assert chi2_pvalue(ids, expected.exp()) > 1e-3


@pytest.mark.parametrize(("n", "b", "m"), [(300, 3, 2), (37, 5, 64), (33, 4, 64), (1000, 1, 1)])
@pytest.mark.parametrize("fmap", ["quadratic", "rff"])
def test_the_positives_log_probs_from_a_draw_equal_the_brute_force(
    n: int, b: int, m: int, fmap: str
) -> None:
    """The positives' log q that ride along a draw (per query: one more forced path of the
    descent, through gathered or whole-level scores) equal `log_prob_all` at those ids, as do
    the draws' own (33 items in buckets of 4: an odd leaf level, padded with an empty node)."""
    d = 6
    quadratic = fmap == "quadratic"
    tree = KernelTree(
        QuadraticFeatures(d, 100.0) if quadratic else RandomFourierFeatures(d, 16, 4.0), b
    )
    tree.rebuild(table(n, d))
    h = unit(40, d, seed=3)
    positives = torch.randint(1, n + 1, (40,), generator=torch.Generator().manual_seed(4))
    ids, log_p, pos = tree.sample(h, m, shared=False, positives=positives)
    assert pos is not None
    brute = tree.log_prob_all(h)
    torch.testing.assert_close(pos, brute.gather(1, positives[:, None])[:, 0])
    torch.testing.assert_close(log_p, brute.gather(1, ids))
    _, _, pos = tree.sample(h, m, shared=True, positives=positives)
    assert pos is not None
    torch.testing.assert_close(pos, tree.log_prob_all(h, shared=True)[0, positives])


@pytest.mark.slow
def test_a_million_items_with_256_frequencies_fit_in_bucket_sized_memory() -> None:
    n, d = 1_000_000, 64
    tree = KernelTree(RandomFourierFeatures(d, 256, 4.0), 32)
    tree.rebuild(table(n, d))
    node_bytes = tree.memory_bytes() - (n + 1) * d * 4
    assert node_bytes <= 2 * (n // 32 + 1) * 512 * 4 + tree.depth * 512 * 4  # ~2 (n / b) F
    assert node_bytes < 160 * 2**20
    ids, log_p, _ = tree.sample(unit(256, d, seed=1), 1024, shared=True)
    assert ids.shape == (1024,) and torch.isfinite(log_p).all() and (log_p <= 0).all()


def test_a_query_with_a_negative_rff_mass_estimate_does_not_take_over_shared_draws() -> None:
    """Few frequencies make some queries' estimated total mass negative; shared draws must
    still follow the whole batch (weighting queries by 1 / estimated mass gave such a query
    nearly all of the mixture)."""
    n, d = 400, 8
    fmap = RandomFourierFeatures(d, 4, 4.0, orthogonal=False, seed=0)
    tree = KernelTree(fmap, 4)
    tree.rebuild(table(n, d))
    pool = unit(400, d, seed=2)
    mass = fmap.features(pool) @ tree.z[0][0]
    bad = pool[mass.argmin()].unsqueeze(0)
    assert mass.min() < 0  # the case is exercised, not hypothetical
    good = pool[mass > mass.median()][:99]  # clearly positive estimates
    batch = torch.cat([good, bad])
    with_bad = tree.log_prob_all(batch, shared=True)[0, 1:].exp()
    without = tree.log_prob_all(good, shared=True)[0, 1:].exp()
    alone = tree.log_prob_all(bad, shared=True)[0, 1:].exp()
    # one query of 100 moves the proposal by about its share, not to its own distribution
    assert (with_bad - without).abs().sum() < 0.1 < (alone - without).abs().sum()
