"""The retrain gate's rule: a paired interval on per-row NDCG@10 decides, not a raw difference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from training.evaluation.metrics import UNRANKED
from training.workflows.gate_evidence import compare, ndcg_of, t_quantile


def _scores(rng: np.random.Generator, rows: int, hit_rate: float) -> np.ndarray:
    """Per-row NDCG@10 of a model that puts each target in its top 10 with `hit_rate`."""
    ranks = np.where(rng.random(rows) < hit_rate, rng.integers(0, 10, rows), UNRANKED)
    return ndcg_of(ranks)


def test_a_certain_win_publishes() -> None:
    rng = np.random.default_rng(0)
    res = compare(_scores(rng, 400, 0.8), _scores(rng, 400, 0.3), 0.95, 0.001)
    assert res.interval[0] > 0 and not res.refuses
    assert res.to_json()["decision"] == "publish"


def test_a_certain_loss_beyond_the_tolerance_refuses() -> None:
    rng = np.random.default_rng(1)
    res = compare(_scores(rng, 400, 0.3), _scores(rng, 400, 0.8), 0.95, 0.001)
    assert res.interval[1] < -0.001 and res.refuses
    assert res.to_json()["decision"] == "refuse"


def test_a_noise_level_difference_publishes() -> None:
    # the case that once decided by chance: 63 rows, the candidate 0.008 below the served model,
    # ahead on 5 rows and behind on 6, equal on the rest
    served = np.full(63, 0.5)
    candidate = served + np.r_[np.full(5, 0.5), np.full(6, -0.5), np.zeros(52)]
    res = compare(candidate, served, 0.95, 0.001)
    assert res.mean_difference == pytest.approx(-0.5 / 63)  # the old rule refused this
    assert res.interval[0] < -0.04 and res.interval[1] > 0.03  # several times wider
    assert not res.refuses
    # the same mean, certain (every row a little worse), is refused
    certain = compare(served - 0.009, served, 0.95, 0.001)
    assert certain.interval == pytest.approx((-0.009, -0.009)) and certain.refuses


def test_a_certain_loss_within_the_tolerance_publishes() -> None:
    served = np.linspace(0.2, 0.9, 50)
    assert not compare(served - 0.0005, served, 0.95, 0.001).refuses
    assert compare(served - 0.0015, served, 0.95, 0.001).refuses


def test_a_higher_confidence_widens_the_interval() -> None:
    rng = np.random.default_rng(3)
    ours, theirs = _scores(rng, 100, 0.5), _scores(rng, 100, 0.55)
    narrow, wide = (compare(ours, theirs, c, 0.0) for c in (0.8, 0.99))
    assert wide.interval[0] < narrow.interval[0] < narrow.interval[1] < wide.interval[1]
    diff = ours - theirs
    expected = stats.t.interval(0.99, 99, loc=diff.mean(), scale=stats.sem(diff))
    assert wide.interval == pytest.approx(expected, rel=1e-6)


def test_fewer_than_two_rows_know_nothing_of_the_noise_and_publish() -> None:
    for rows in (0, 1):
        res = compare(np.zeros(rows), np.ones(rows), 0.95, 0.001)
        assert res.interval == (-math.inf, math.inf) and not res.refuses
        payload = res.to_json()
        assert payload["interval"] == [None, None] and payload["rows"] == rows
        json.dumps(payload, allow_nan=False)  # valid JSON: no infinity


def test_the_json_carries_the_interval_and_the_settings() -> None:
    res = compare(np.array([0.5, 1.0, 0.0, 0.3]), np.array([0.4, 0.6, 0.1, 0.3]), 0.9, 0.002)
    payload = res.to_json()
    assert payload["decision"] == "publish" and payload["metric"] == "ndcg@10"
    assert payload["rows"] == 4 and payload["confidence"] == 0.9 and payload["tolerance"] == 0.002
    assert payload["mean_difference"] == pytest.approx(0.1)
    low, high = payload["interval"]
    assert low < 0.1 < high and payload["method"] == "paired t interval"
    assert "90% interval" in res.describe() and "on 4 rows" in res.describe()


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 12, 30, 31, 62, 1000])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.999])
def test_the_t_quantile_matches_scipy(df: int, confidence: float) -> None:
    expected = stats.t.ppf((1 + confidence) / 2, df)
    assert t_quantile(confidence, df) == pytest.approx(expected, rel=2e-6)
