"""Negative samplers: one small module each, all registered in `SAMPLERS`."""

from data.errors import RecsysInputError
from training.config import SamplerConfig

# Importing a sampler module registers it.
from training.samplers import (  # noqa: E402, F401
    bernoulli,
    exact,
    in_batch,
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


def build_sampler(cfg: SamplerConfig, ctx: SamplerContext) -> NegativeSampler:
    """Build the sampler named by `cfg.name`.

    Raises:
        RecsysInputError: the name is not registered (the message lists the known names).

    """
    if cfg.name not in SAMPLERS:
        known = ", ".join(sorted(SAMPLERS))
        raise RecsysInputError(f"unknown sampler {cfg.name!r}; known samplers: {known}")
    return SAMPLERS[cfg.name](cfg, ctx)


__all__ = [
    "SAMPLERS",
    "NegativeSampler",
    "Negatives",
    "SamplerContext",
    "build_sampler",
    "register_sampler",
]
