"""The uniform negative sampler."""
