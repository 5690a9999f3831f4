"""studies/tapas_false_negatives.py on a tiny trained run: figures that match a hand count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from benchmarks.studies import tapas_false_negatives
from tests.benchmarks.helpers import tiny_trained_home


def test_kept_negatives_that_are_batch_targets_match_a_hand_count(tmp_path: Path) -> None:
    home = tiny_trained_home(tmp_path)
    (run,) = [p for p in (home / "runs").iterdir() if p.is_dir()]
    script = tapas_false_negatives
    # 80 items, m = 10, r = 8: the presample is the whole catalogue, so the kept set is the
    # top 10 of sum_i exp(h_i . c / tau) over all items, which is computed here by hand
    rows = script.measure(run, batches=3, ratios=[1.0, 8.0], temperatures=[1.0, 0.05], m=10)
    assert [(r["ratio"], r["tau"], r["m"], r["batches"]) for r in rows] == [
        (1.0, 1.0, 10, 3), (1.0, 0.05, 10, 3), (8.0, 1.0, 10, 3), (8.0, 0.05, 10, 3),
    ]  # fmt: skip
    batches, items, counts = script.encoded_batches(run, 3)
    shares, pushes, own = [], [], []
    for queries, positives, windows in batches:
        scores = torch.logsumexp(items[1:] @ queries.T / 0.05, dim=1)  # item_idx 1..n
        kept = scores.topk(10).indices.numpy() + 1
        in_batch = np.bincount(positives.numpy(), minlength=len(counts))[kept]
        shares.append((in_batch > 0).mean())
        pushes.append(in_batch.mean())
        own.append(np.mean([[k in set(w.tolist()) for k in kept] for w in windows]))
    whole = rows[-1]
    assert np.isclose(whole["kept_batch_target_share"], np.mean(shares))
    assert np.isclose(whole["kept_queries_per_negative"], np.mean(pushes))
    assert np.isclose(whole["kept_own_window_share"], np.mean(own))
    assert 0.0 < whole["kept_own_window_share"] < 1.0
    assert 0.0 < whole["presample_batch_target_share"] < 1.0
    # r = 1: a random presample of about 10 of the 80 items, the same draw at every tau
    assert rows[0]["presample_batch_target_share"] == rows[1]["presample_batch_target_share"]
    assert rows[0]["presample_batch_target_share"] != whole["presample_batch_target_share"]
