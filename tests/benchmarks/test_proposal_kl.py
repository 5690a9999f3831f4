"""studies/proposal_kl.py: one leaf bucket at nu = 1 / temperature is the model's softmax."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.studies import proposal_kl
from tests.benchmarks.helpers import tiny_trained_home
from training.config import RecsysConfig


def test_one_bucket_at_the_softmax_temperature_has_zero_kl(tmp_path: Path) -> None:
    home = tiny_trained_home(tmp_path)
    nu = 1 / RecsysConfig().model.temperature  # exp(nu h . c) is the trained model's softmax
    result = proposal_kl.measure(home, None, 32, [64], [nu], [1e-6], [4, 1000])
    rff = [r for r in result["results"] if r["sampler"] == "rff" and r["per_query"]]
    per_query = {r["leaf_size"]: r["kl"] for r in rff}
    # b >= n leaves one bucket, drawn by the exact Gaussian kernel: no RFF noise, no bias.
    assert per_query[1000] == pytest.approx(0.0, abs=1e-4)
    # b = 4 routes draws through RFF estimates of 20 buckets' masses: a real, positive bias.
    assert per_query[4] > 0.05
    (exact,) = [r["kl"] for r in result["results"] if r["sampler"] == "exact"]
    assert exact > 0  # the exact sampler's shared proposal mixes 32 queries' softmaxes
