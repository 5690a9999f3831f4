"""The mixed negative sampler."""
