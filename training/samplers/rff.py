"""The rff negative sampler."""
