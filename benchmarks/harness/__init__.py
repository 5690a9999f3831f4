"""What the benchmarks share: option values, output files, curves, pairs, a server process.

Option parsing and atomic output files (`options`), a run's validation curve (`curves`), the
per-user paired bootstrap (`paired`), a real `recsys serve` process (`server_process`) and the
settings each sampler takes of those a benchmark sets for all (`sampler_keys`).
Imports the product's public API only; never a benchmark (`speed/`, `sweeps/`, `studies/`).
"""
