"""The `rff` sampler: random Fourier features of the Gaussian kernel (RF-softmax).

On L2-normalised vectors exp(-nu ||h - c||^2 / 2) is proportional to exp(nu h . c), so with
logits h . c / temperature, nu = 1 / temperature would match the model softmax; Rawat et al.
find nu below that best for a finite number of frequencies (cfg.rff_nu). D = cfg.rff_features
frequencies give 2D features (cos, sin); cfg.rff_orthogonal picks orthogonal random features.
"""

from __future__ import annotations

from training.config import SamplerConfig
from training.feature_maps import RandomFourierFeatures
from training.samplers._kernel import KernelTreeSampler
from training.samplers.base import SamplerContext, register_sampler


@register_sampler("rff")
class RFFSampler(KernelTreeSampler):
    """Kernel-tree sampler with D random Fourier frequencies (2D features) of temperature nu."""

    def __init__(self, cfg: SamplerConfig, ctx: SamplerContext) -> None:
        """Build lazily: the frequencies are drawn (from `ctx.seed`) at the first refresh."""
        super().__init__(
            cfg,
            ctx,
            lambda dim: RandomFourierFeatures(
                dim, cfg.rff_features, cfg.rff_nu, orthogonal=cfg.rff_orthogonal, seed=ctx.seed
            ),
        )
