"""The `quadratic` sampler: q_i proportional to alpha o_i^2 + 1 through the kernel tree.

Blanc & Rendle (2018, sec. 3.3 and 4.1.2) define the kernel on the logit o = h . c of their
model: q_i ~ 100 o_i^2 + 1. Our logit is o = h . c / temperature with h, c L2-normalised, so
the map is built on the unit vectors with coefficient alpha / temperature^2; with the paper's
alpha = 100 and the default temperature 0.1 that is 10000 (h . c)^2 + 1. (On h . c itself the kernel
would be nearly flat: 100 (h . c)^2 + 1 is about 1.4 for a typical item at d = 256.)

They pair it with the absolute-softmax loss (`loss.name: absolute_softmax`, which `--sampler
quadratic` sets), since the kernel is symmetric in the sign of o. The explicit feature map has
d^2 + 1 features (65537 at d = 256), so leaf buckets hold at least ceil((d^2 + 1) / d) items:
at d = 256 a Beauty epoch at m = 64 took 273 s (rff: 124 s; two runs sharing 2 cores), so
prefer rff at large d (docs/benchmarks/archive/benchmarks.md). Per query by default, as in the
paper.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from training.feature_maps import QuadraticFeatures
from training.samplers._kernel import KernelTreeSampler, KernelTreeSettings
from training.samplers.base import SamplerContext, register_sampler


class QuadraticSettings(KernelTreeSettings):
    """`sampler: {name: quadratic}`; `--sampler quadratic` brings the absolute softmax.

    The flag also brings the cosine logits every kernel-tree sampler needs.
    """

    name: Literal["quadratic"] = "quadratic"
    alpha: float = Field(
        100.0, gt=0.0, description="Kernel alpha o^2 + 1 on the logit o = h.c / temperature."
    )
    pairs_with: ClassVar[dict[str, dict[str, Any]]] = {
        **KernelTreeSettings.pairs_with,
        "loss": {"name": "absolute_softmax"},
    }

    def fixes_the_temperature(self) -> bool:
        """Always: its map is built on alpha / tau^2 at the start, and has no tau of its own."""
        return True


@register_sampler(QuadraticSettings)
class QuadraticSampler(KernelTreeSampler):
    """Kernel-tree sampler with K = cfg.alpha o^2 + 1 on the logit o = h . c / tau."""

    def __init__(self, cfg: QuadraticSettings, ctx: SamplerContext) -> None:
        """Build lazily: the d^2 + 1 map is created at the first refresh."""
        alpha = cfg.alpha / ctx.temperature**2  # alpha o^2 = alpha / tau^2 (h . c)^2
        super().__init__(cfg, ctx, lambda dim: QuadraticFeatures(dim, alpha))
