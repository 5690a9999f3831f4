"""retrain(): `--since` trains and gates on the recent events only; a retrain killed after its
publish, before it cleared its journal, is finished by the re-run without training again."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
import pytest

from data import store
from data.workspace import Workspace
from model.bundle import current_version, read_manifest
from tests.training.retraining import TINY, retrain_on, serve_v1, write_logs
from training.config_loading import load_config
from training.workflows import journal
from training.workflows.pipeline import load_splits

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_logs(tmp_path_factory.mktemp("logs"))


def test_since_trains_and_measures_the_events_at_or_after_it(
    ws: Workspace, logs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    old, new = logs
    serve_v1(ws, old)
    since = int(pl.read_csv(new)["timestamp"].median())  # half the new events are older
    with caplog.at_level(logging.INFO, logger="training.workflows.scoring"):
        res = retrain_on(ws, new, "retrain.tolerance=1.0", since=since, max_epochs=1)
    cfg = load_config(overrides=TINY)
    recent, everything = load_splits(ws, cfg, since), load_splits(ws, cfg)
    assert 0 < recent.test.height < everything.test.height
    assert f"ranking every item for the {recent.test.height} test rows" in caplog.text
    assert f"for the {everything.test.height} test rows" not in caplog.text
    manifest = read_manifest(ws.models_dir / res.version)
    assert res.published and manifest.retrain is not None
    assert manifest.retrain.since == since  # what it trained on, recorded
    assert manifest.events == list(everything.parts)


def test_a_retrain_killed_after_its_publish_is_finished_by_the_rerun(
    ws: Workspace, logs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = logs
    serve_v1(ws, old)
    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove", lambda ws: None)  # killed before it clears it
        first = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=1)
    assert first.published and current_version(ws.models_dir) == first.version
    assert journal.read(ws) is not None  # what a SIGKILL just after the publish leaves
    events = store.count_events(ws)
    checkpoints = ws.runs_dir / first.version / "checkpoints"
    written = {p.name: p.stat().st_mtime_ns for p in checkpoints.iterdir()}
    again = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=1)
    assert (again.version, again.previous_version) == (first.version, "v1") and again.published
    assert again.reason == "published already (by the run this one resumed)"
    assert (again.new_events, again.new_items) == (first.new_events, first.new_items)
    assert journal.read(ws) is None and current_version(ws.models_dir) == first.version
    assert store.count_events(ws) == events  # nothing ingested twice
    assert {p.name: p.stat().st_mtime_ns for p in checkpoints.iterdir()} == written  # no fit
