"""Scoring a published bundle: rows it cannot score are misses, never a crash."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from data.errors import RecsysInputError
from data.ingest import ingest_files
from data.workspace import Workspace
from model.bundle import ModelBundle
from tests.serving.bundles import make_bundle
from training.workflows.scoring import bundle_metrics, evaluate


def test_a_frame_with_no_target_the_model_knows_scores_zero_on_no_rows(tmp_path: Path) -> None:
    model = ModelBundle.load(make_bundle(tmp_path / "models", "v1", num_items=60))
    rows = pl.DataFrame(
        {"user_idx": [1, 2], "history": [[1, 2], [3]], "target": [61, 75]},
        schema={"user_idx": pl.Int64, "history": pl.List(pl.Int64), "target": pl.Int64},
    )
    metrics, examples = bundle_metrics(model, rows)
    assert examples == 0
    assert metrics["ndcg@10"] == metrics["recall@100"] == metrics["mrr@20"] == 0.0
    assert "full_ce" not in metrics  # an unknown target has no log-probability


def test_evaluate_with_no_row_to_measure_is_an_input_error(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    log = tmp_path / "short.csv"  # two events a user: no val or test row
    log.write_text("user_id,item_id,timestamp\nu1,i1,1\nu1,i2,2\nu2,i3,1\nu2,i4,2\n")
    ingest_files(ws, [log])
    make_bundle(ws.models_dir, "v1")
    with pytest.raises(RecsysInputError, match="no test rows to measure v1 on: the split has 0"):
        evaluate(ws, None, "test")


def test_history_items_the_model_does_not_know_are_left_out_as_serving_does(
    tmp_path: Path,
) -> None:
    model = ModelBundle.load(make_bundle(tmp_path / "models", "v1", num_items=60))
    schema = {"user_idx": pl.Int64, "history": pl.List(pl.Int64), "target": pl.Int64}
    known = pl.DataFrame({"user_idx": [1], "history": [[4, 9]], "target": [7]}, schema=schema)
    newest_unknown = known.with_columns(pl.lit([4, 61, 9, 70], pl.List(pl.Int64)).alias("history"))
    # an unknown newest item once left the query all zeros: every item tied, a certain miss
    assert bundle_metrics(model, newest_unknown) == bundle_metrics(model, known)
