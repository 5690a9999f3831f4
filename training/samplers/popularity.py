"""The popularity negative sampler."""
