"""The in_batch negative sampler."""
