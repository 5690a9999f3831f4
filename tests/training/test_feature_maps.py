"""Feature maps: the quadratic map is exact; RFF estimates the Gaussian kernel, MSE falls with D."""

from __future__ import annotations

import math

import pytest
import torch

from training.feature_maps import QuadraticFeatures, RandomFourierFeatures


def unit(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1)


def test_quadratic_map_is_exact_and_has_d_squared_plus_one_features() -> None:
    fmap = QuadraticFeatures(5, 100.0)
    h, c = unit(3, 5, seed=0), unit(7, 5, seed=1)
    assert fmap.dim == 26 and fmap.features(h).shape == (3, 26)
    torch.testing.assert_close(fmap.features(h) @ fmap.features(c).T, 100 * (h @ c.T) ** 2 + 1)
    coef = torch.tensor([0.2, 0.5, 0.3])
    torch.testing.assert_close(fmap.mixture_kernel(h, coef, c), coef @ fmap.kernel(h @ c.T))
    w = torch.tensor([[1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    torch.testing.assert_close(
        fmap.bucket_sums(c.unsqueeze(0), w), (fmap.features(c) * w.T).sum(0, keepdim=True)
    )


def test_hand_worked_quadratic_value() -> None:
    fmap = QuadraticFeatures(2, 4.0)
    h, c = torch.tensor([[0.6, 0.8]]), torch.tensor([[1.0, 0.0]])
    assert fmap.features(h) @ fmap.features(c).T == pytest.approx(4 * 0.36 + 1)


def rff_mse(num: int, nu: float, orthogonal: bool, seeds: int = 4) -> float:
    h, c = unit(64, 16, seed=7), unit(64, 16, seed=8)
    dots = h @ c.T
    target = torch.exp(nu * (dots - 1))  # = exp(-nu |h - c|^2 / 2) on unit vectors
    errs = []
    for seed in range(seeds):
        fmap = RandomFourierFeatures(16, num, nu, orthogonal=orthogonal, seed=seed)
        errs.append(float(((fmap.features(h) @ fmap.features(c).T - target) ** 2).mean()))
    return sum(errs) / seeds


@pytest.mark.parametrize("orthogonal", [False, True])
def test_rff_mse_falls_with_the_number_of_frequencies(orthogonal: bool) -> None:
    """As in Table 1 of rf-softmax: MSE ~ 1/D, so 8x the frequencies cut it by ~8x."""
    mse = [rff_mse(num, 4.0, orthogonal) for num in (16, 128, 1024)]
    assert mse[0] > 4 * mse[1] > 16 * mse[2]
    assert mse[2] < 2e-3


def test_rff_estimates_the_softmax_kernel_up_to_a_constant() -> None:
    """exp(nu) phi(h).phi(c) -> exp(nu h.c): the model's exp(h.c / T) for nu = 1 / T."""
    nu = 2.0
    h, c = unit(32, 8, seed=3), unit(32, 8, seed=4)
    fmap = RandomFourierFeatures(8, 20_000, nu, orthogonal=False, seed=1)
    estimate = math.exp(nu) * fmap.features(h) @ fmap.features(c).T
    torch.testing.assert_close(estimate, torch.exp(nu * h @ c.T), atol=0.2, rtol=0.02)


def test_frequency_distributions() -> None:
    iid = RandomFourierFeatures(8, 40_000, 3.0, orthogonal=False, seed=0)
    cov = iid.w.T @ iid.w / 40_000
    torch.testing.assert_close(cov, 3.0 * torch.eye(8), atol=0.1, rtol=0)
    orf = RandomFourierFeatures(8, 20, 3.0, orthogonal=True, seed=0)
    block = orf.w[:8]
    gram = block @ block.T
    torch.testing.assert_close(
        gram - torch.diag(torch.diagonal(gram)), torch.zeros(8, 8), atol=1e-4, rtol=0
    )
    assert orf.w.shape == (20, 8) and orf.dim == 40


@pytest.mark.parametrize(
    "fmap", [QuadraticFeatures(6, 100.0), RandomFourierFeatures(6, 32, 4.0, seed=2)]
)
def test_pairwise_and_bucket_sums_agree_with_the_kernel_and_the_features(
    fmap: QuadraticFeatures | RandomFourierFeatures,
) -> None:
    """The fused forms the tree uses (scale and shift inside the product, weighted bucket
    sums, the mixture) equal the plain kernel of the dot products and the plain feature sums."""
    h, c = unit(4, 6, seed=5), unit(9, 6, seed=6)
    torch.testing.assert_close(fmap.pairwise_kernel(h, c), fmap.kernel(h @ c.T))
    grouped = fmap.grouped_kernel(h.view(2, 2, 6), c[:8].view(2, 4, 6))
    torch.testing.assert_close(grouped[1], fmap.kernel(h[2:] @ c[4:8].T))
    coef = torch.tensor([0.1, 0.2, 0.3, 0.4])
    torch.testing.assert_close(fmap.mixture_kernel(h, coef, c), coef @ fmap.kernel(h @ c.T))
    groups, weight = c[:8].view(2, 4, 6), torch.tensor([[1.0, 0, 1, 1], [1, 1, 0.5, 0]])
    expected = (fmap.features(groups) * weight.unsqueeze(-1)).sum(1)
    torch.testing.assert_close(fmap.bucket_sums(groups, weight), expected)
