"""The quadratic negative sampler."""
