"""`python -m benchmarks <command>` runs a benchmark (`benchmarks/cli.py`)."""

from benchmarks.cli import main

main()
