"""The exact negative sampler."""
