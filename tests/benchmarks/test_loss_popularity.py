"""studies/loss_popularity.py on a tiny trained run: figures that match a hand count."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.studies import loss_popularity
from tests.benchmarks.helpers import tiny_trained_home


def test_popularity_figures_of_a_trained_run(tmp_path: Path) -> None:
    home = tiny_trained_home(tmp_path)
    (run,) = [p for p in (home / "runs").iterdir() if p.is_dir()]
    script = loss_popularity
    figures = script.measure(run, users=50)
    logits, targets, counts = script._logits(run, 50)
    assert figures["users"] == len(targets) == 50 and logits.shape == (50, len(counts))
    top = np.argsort(-logits, axis=1)[:, :10]
    assert figures["top10_median_train_count"] == float(np.median(counts[top]))
    assert figures["target_logit_mean"] == float(logits[np.arange(50), targets].mean())
    assert figures["rarest_decile_logit_mean"] != figures["commonest_decile_logit_mean"]
    assert counts.sum() > 0 and figures["target_median_train_count"] >= 1
