"""The real amazon-beauty log: ingest finds the published sizes, and LOO uses every user."""

from __future__ import annotations

from data.ingest import ingest_files
from data.split import build_splits
from data.workspace import Workspace
from tests.conftest import shared_dataset


def test_amazon_beauty_counts(ws: Workspace) -> None:
    report = ingest_files(ws, [shared_dataset("amazon-beauty")])
    assert (report.accepted, report.rejected) == (198_502, 0)
    assert (report.users_total, report.items_total, report.events_total) == (
        22_363,
        12_101,
        198_502,
    )
    splits = build_splits(ws, "loo")
    assert splits.num_items == 12_101
    assert splits.test.height == 22_363  # 5-core: every user has at least 3 events
    train_events = splits.train["items"].list.len().sum()
    assert train_events + 2 * splits.test.height == 198_502
