"""Negative samplers: one small module each, with its settings class, registered in one call.

`@register_sampler(ItsSettings)` on the sampler class adds it to `SAMPLERS` and its settings
class to `training.sampler_settings.SETTINGS`; importing the module does it.
"""

from training.sampler_settings import SampledSettings

# Importing a sampler module registers it.
from training.samplers import (  # noqa: E402, F401
    bernoulli,
    exact,
    in_batch,
    midx,
    mixed,
    popularity,
    quadratic,
    rff,
    tapas,
    uniform,
)
from training.samplers.base import (
    SAMPLERS,
    Negatives,
    NegativeSampler,
    SamplerContext,
    register_sampler,
)


def build_sampler(cfg: SampledSettings, ctx: SamplerContext) -> NegativeSampler:
    """Build the sampler `cfg` configures (its name was checked when the config was read)."""
    return SAMPLERS[cfg.name](cfg, ctx)


__all__ = [
    "SAMPLERS",
    "NegativeSampler",
    "Negatives",
    "SamplerContext",
    "build_sampler",
    "register_sampler",
]
