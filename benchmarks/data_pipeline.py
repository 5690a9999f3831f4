"""Data pipeline benchmark: synth, ingest, re-ingest (duplicates) and splits on a synthetic log.

Usage: python benchmarks/data_pipeline.py [--events N] [--json FILE]
Same as `recsys bench data-pipeline`; writes benchmarks/results/data_pipeline.json by default.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import typer  # noqa: E402

from app.bench.data_pipeline import data_pipeline  # noqa: E402

if __name__ == "__main__":
    typer.run(data_pipeline)
