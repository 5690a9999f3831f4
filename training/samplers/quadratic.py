"""The `quadratic` sampler: K(h, c) = alpha (h . c)^2 + 1 through the kernel tree.

Blanc & Rendle (2018) pair it with the absolute-softmax loss (`loss.name: absolute_softmax`),
since the kernel is symmetric in the sign of h . c. The explicit feature map has d^2 + 1
features (4097 at d = 64), so leaf buckets hold at least ceil((d^2 + 1) / d) items.
"""

from __future__ import annotations

from training.config import SamplerConfig
from training.feature_maps import QuadraticFeatures
from training.samplers._kernel import KernelTreeSampler
from training.samplers.base import SamplerContext, register_sampler


@register_sampler("quadratic")
class QuadraticSampler(KernelTreeSampler):
    """Kernel-tree sampler with the quadratic kernel, alpha = cfg.kernel_alpha."""

    def __init__(self, cfg: SamplerConfig, ctx: SamplerContext) -> None:
        """Build lazily: the d^2 + 1 map is created at the first refresh."""
        super().__init__(cfg, ctx, lambda dim: QuadraticFeatures(dim, cfg.kernel_alpha))
