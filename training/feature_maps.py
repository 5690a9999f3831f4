"""Kernel feature maps phi with K(h, c) ~= phi(h) . phi(c), for the kernel tree.

Two kernels, both functions of the dot product of L2-normalised vectors:

- `QuadraticFeatures`: K(h, c) = alpha (h . c)^2 + 1 (Blanc & Rendle 2018, eq. 10; the sampler
  passes alpha / temperature^2 so that the kernel acts on the logit, as in the paper). The explicit
  map phi(a) = [sqrt(alpha) vec(a a^T), 1] has F = d^2 + 1 features and is exact.
- `RandomFourierFeatures`: the Gaussian kernel exp(-nu ||h - c||^2 / 2), which on unit vectors is
  exp(nu (h . c - 1)), i.e. proportional to exp(nu h . c) (Rawat et al. 2019, eq. 16-19). D random
  frequencies w_k ~ N(0, nu I) give 2D features [cos(W u), sin(W u)] / sqrt(D): "D frequencies,
  2D features". Optionally orthogonal random features (Yu et al. 2016): W = sqrt(nu) S Q.

Each map also gives the exact kernel value from dot products (`kernel`), which the tree uses
inside leaf buckets, where scoring b items in the original d-dimensional space is O(b d).
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor


class FeatureMap(Protocol):
    """A kernel with an explicit (exact or random) feature map."""

    dim: int  # F, the number of features
    grouped_sums: bool  # bucket_sums is cheaper than one F-sized feature row per item

    def features(self, x: Tensor) -> Tensor:
        """Map `[..., d]` vectors to `[..., F]` features."""
        ...

    def kernel(self, dots: Tensor) -> Tensor:
        """Exact kernel values K from dot products h . c (any shape, same shape out)."""
        ...

    def pairwise_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """K(h_b, c_j) for every pair: `h [B, d]`, `c [k, d]` -> `[B, k]`."""
        ...

    def grouped_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """K of every pair within each group: `h [G, r, d]`, `c [G, k, d]` -> `[G, r, k]`."""
        ...

    def mixture_kernel(self, h: Tensor, coef: Tensor, c: Tensor) -> Tensor:
        """sum_b coef_b K(h_b, c_j): `h [B, d]`, `coef [B]`, `c [k, d]` -> `[k]`."""
        ...

    def bucket_sums(self, x: Tensor, weight: Tensor) -> Tensor:
        """sum_j weight_j phi(x_j) per group: `x [G, b, d]`, `weight [G, b]` -> `[G, F]`."""
        ...


class QuadraticFeatures:
    """K(h, c) = alpha (h . c)^2 + 1 with its exact map of F = d^2 + 1 features."""

    def __init__(self, dim: int, alpha: float) -> None:
        """Build the map for `dim`-dimensional vectors.

        Args:
            dim: Embedding size d.
            alpha: Kernel coefficient (the paper uses 100).

        """
        self.d = dim
        self.alpha = float(alpha)
        self.dim = dim * dim + 1
        self.grouped_sums = True

    def features(self, x: Tensor) -> Tensor:
        """`[..., d]` -> `[..., d^2 + 1]`: [sqrt(alpha) vec(x x^T), 1]."""
        outer = x.unsqueeze(-1) * x.unsqueeze(-2)
        flat = outer.flatten(-2) * math.sqrt(self.alpha)
        return torch.cat([flat, torch.ones_like(x[..., :1])], dim=-1)

    def kernel(self, dots: Tensor) -> Tensor:
        """The exact kernel alpha dots^2 + 1."""
        return self.alpha * dots.square() + 1.0

    def pairwise_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """The kernel alpha (h . c)^2 + 1 of every pair `[B, k]`, in place on the product."""
        return (h @ c.T).square_().mul_(self.alpha).add_(1.0)

    def grouped_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """The kernel alpha (h . c)^2 + 1 within each group `[G, r, k]`, in place on one bmm."""
        return torch.bmm(h, c.transpose(1, 2)).square_().mul_(self.alpha).add_(1.0)

    def mixture_kernel(self, h: Tensor, coef: Tensor, c: Tensor) -> Tensor:
        """Quadratic form c^T M c with M = alpha sum_b coef_b h_b h_b^T: O(k d^2), not O(k B d)."""
        m = (h * coef.unsqueeze(-1)).transpose(0, 1) @ h * self.alpha  # [d, d]
        return ((c @ m) * c).sum(-1) + coef.sum()

    def bucket_sums(self, x: Tensor, weight: Tensor) -> Tensor:
        """Weighted outer-product sums X^T diag(w) X per group, without d^2 rows per item."""
        outer = torch.einsum("gbi,gbj->gij", x * weight.unsqueeze(-1), x) * math.sqrt(self.alpha)
        return torch.cat([outer.flatten(1), weight.sum(1, keepdim=True)], dim=1)


def _orthogonal_frequencies(num: int, dim: int, gen: torch.Generator) -> Tensor:
    """`[num, dim]` rows in blocks of `dim` orthogonal directions with chi(dim) lengths."""
    blocks = math.ceil(num / dim)
    q, r = torch.linalg.qr(torch.randn(blocks, dim, dim, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar-uniform
    lengths = torch.randn(blocks, dim, dim, generator=gen, dtype=torch.float64).norm(dim=-1)
    return (lengths.unsqueeze(-1) * q.transpose(-2, -1)).reshape(-1, dim)[:num]


class RandomFourierFeatures:
    """D random frequencies of the Gaussian kernel exp(-nu ||x - y||^2 / 2): 2D features."""

    def __init__(
        self, dim: int, num_frequencies: int, nu: float, orthogonal: bool = True, seed: int = 0
    ) -> None:
        """Draw the frequencies.

        Args:
            dim: Embedding size d.
            num_frequencies: D; the map has 2D features (cos and sin).
            nu: Kernel temperature; on unit vectors K is proportional to exp(nu h . c), so
                nu = 1 / model temperature would target the model softmax exactly.
            orthogonal: Orthogonal random features (lower variance) instead of i.i.d. Gaussian.
            seed: Seed of the frequencies (the map must not change between rebuilds).

        """
        gen = torch.Generator().manual_seed(seed)
        if orthogonal:
            w = _orthogonal_frequencies(num_frequencies, dim, gen)
        else:
            w = torch.randn(num_frequencies, dim, generator=gen, dtype=torch.float64)
        self.w = (w * math.sqrt(nu)).to(torch.float32)  # [D, d], rows ~ N(0, nu I)
        self.nu = float(nu)
        self.num_frequencies = num_frequencies
        self.dim = 2 * num_frequencies
        self.grouped_sums = False

    def to(self, device: torch.device) -> RandomFourierFeatures:
        """Move the frequencies to `device` (in place; returns self)."""
        self.w = self.w.to(device)
        return self

    def features(self, x: Tensor) -> Tensor:
        """`[..., d]` -> `[..., 2D]`: [cos(W x), sin(W x)] / sqrt(D)."""
        return self._cos_sin(x).mul_(1.0 / math.sqrt(self.num_frequencies))

    def _cos_sin(self, x: Tensor) -> Tensor:
        """`[..., 2D]` [cos(W x), sin(W x)], unscaled, written into one buffer (no concat)."""
        proj = x @ self.w.to(x.device).T
        out = proj.new_empty(*proj.shape[:-1], self.dim)
        torch.cos(proj, out=out[..., : self.num_frequencies])
        torch.sin(proj, out=out[..., self.num_frequencies :])
        return out

    def kernel(self, dots: Tensor) -> Tensor:
        """exp(nu (dots - 1)): the Gaussian kernel on unit vectors, in (0, 1]."""
        return torch.exp(self.nu * (dots - 1.0))

    def pairwise_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """exp(nu (h . c - 1)) for every pair `[B, k]`: scale and shift inside the product."""
        shift = torch.full((1, 1), -self.nu, dtype=h.dtype, device=h.device)
        return torch.addmm(shift, h, c.T, alpha=self.nu).exp_()

    def grouped_kernel(self, h: Tensor, c: Tensor) -> Tensor:
        """exp(nu (h . c - 1)) within each group `[G, r, k]`: one baddbmm, exp in place."""
        shift = torch.full((1, 1, 1), -self.nu, dtype=h.dtype, device=h.device)
        return torch.baddbmm(shift, h, c.transpose(1, 2), alpha=self.nu).exp_()

    def mixture_kernel(self, h: Tensor, coef: Tensor, c: Tensor) -> Tensor:
        """sum_b coef_b exp(nu (h_b . c_j - 1)) via one `[B, k]` product, exp in place."""
        return coef @ self.pairwise_kernel(h, c)

    def bucket_sums(self, x: Tensor, weight: Tensor) -> Tensor:
        """sum_j weight_j phi(x_j) per group: `x [G, b, d]`, `weight [G, b]` -> `[G, 2D]`.

        A `[G, 1, b] x [G, b, 2D]` product that reads the features row by row, with the
        1 / sqrt(D) scale on the b weights rather than on the G b 2D features.
        """
        scaled = (weight * (1.0 / math.sqrt(self.num_frequencies))).unsqueeze(1)
        return torch.bmm(scaled, self._cos_sin(x)).squeeze(1)
