"""One-off studies behind docs/benchmarks/archive/benchmarks.md and the sampler and retrain reports.

Each runs as `python -m benchmarks.studies.<name> --help`; every run writes its records
through `benchmarks.records`.
"""
