"""Timing benchmarks, one `python -m benchmarks` command each.

The data pipeline, sampler draws, training steps, a profile of real steps, data-parallel
throughput, faiss indexes, the server under load, and posted events. The measurement of the
torch ones lives in a module of its own, imported only when the command runs.
"""
