"""The `rff` sampler: random Fourier features of the Gaussian kernel (RF-softmax).

On L2-normalised vectors exp(-nu ||h - c||^2 / 2) is proportional to exp(nu h . c), so with
logits h . c / temperature, nu = 1 / temperature would match the model softmax; Rawat et al.
find nu below that best for a finite number of frequencies (cfg.nu). D = cfg.features
frequencies give 2D features (cos, sin); cfg.orthogonal picks orthogonal random features.

The defaults: D = 1024 frequencies (the paper's order of D), nu = 5, buckets of 128 items and a
node-score floor of 1e-3, per query (shared draws from the batch's summed kernel are far less
adaptive): on amazon-beauty at m = 64 test NDCG@10 -2.3% and -3.5% (two seeds) from the full
softmax, where D = 128, nu = 4, b = 32, floor 1e-6 gave -7.1%
(docs/benchmarks/archive/benchmarks.md). Buckets of
128 slow draws on catalogues of millions: lower leaf_size there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from training.feature_maps import RandomFourierFeatures
from training.samplers._kernel import KernelTreeSampler, KernelTreeSettings
from training.samplers.base import SamplerContext, register_sampler


class RFFSettings(KernelTreeSettings):
    """`sampler: {name: rff}` (the defaults: the module docstring)."""

    name: Literal["rff"] = "rff"
    features: int = Field(1024, ge=1, description="D random frequencies: 2D cos/sin numbers.")
    nu: float = Field(5.0, gt=0.0, description="Gaussian kernel temperature nu.")
    orthogonal: bool = Field(True, description="Orthogonal random features.")
    leaf_size: int = Field(128, ge=1, description="Kernel tree leaf bucket size b.")
    score_floor: float = Field(1e-3, gt=0.0, description="Kernel tree node score floor.")


@register_sampler(RFFSettings)
class RFFSampler(KernelTreeSampler):
    """Kernel-tree sampler with D random Fourier frequencies (2D features) of temperature nu."""

    def __init__(self, cfg: RFFSettings, ctx: SamplerContext) -> None:
        """Build lazily: the frequencies are drawn (from `ctx.seed`) at the first refresh."""
        super().__init__(
            cfg,
            ctx,
            lambda dim: RandomFourierFeatures(
                dim, cfg.features, cfg.nu, orthogonal=cfg.orthogonal, seed=ctx.seed
            ),
        )
