"""One-off studies behind docs/benchmarks/archive/benchmarks.md and the sampler and retrain reports.

Each runs as `python -m benchmarks.studies.<name> --help`; every run writes its records
through `benchmarks.records`. Importing `app.cli_common` here gives every study's `--help` the
rendering `recsys` and `python -m benchmarks` have: flags bare, no Python types.
"""

import app.cli_common  # noqa: F401  (its import installs the help rendering)
