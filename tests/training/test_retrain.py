"""retrain(): new items and users, warm start, the quality gate (on the kept round, before the
refit), the home lock, resuming."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from data import store, vocab
from data.errors import RecsysInputError
from data.ingest import LogLayout
from data.lock import HomeBusyError, training_lock
from data.workspace import Workspace
from model.bundle import (
    ModelBundle,
    RetrainOrigin,
    current_version,
    describe,
    read_manifest,
    rollback,
)
from tests.training.retraining import TINY, retrain_on, serve_v1, write_logs
from training.config import RecsysConfig
from training.config_loading import load_config
from training.loop.checkpoints import BEST_CHECKPOINT, load_checkpoint
from training.loop.datamodule import item_counts
from training.loop.module_build import build_module
from training.workflows import journal
from training.workflows.gate import COUNTS, gate_and_publish, gate_rows
from training.workflows.pipeline import load_splits, train
from training.workflows.retrain import (
    RetrainRequest,
    _resume_or_ingest,
    _users_unseen_by_served,
    served_config,
)
from training.workflows.scoring import bundle_metrics, rows_metrics

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An old log, and a new one with later events, 15 new items and some new users."""
    return write_logs(tmp_path_factory.mktemp("logs"))


def test_retrain_adds_items_and_users_keeps_indices_and_publishes(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    before = vocab.load_item_vocab(ws).select("item_id", "item_idx")
    users_before = vocab.load_user_vocab(ws).height
    res = retrain_on(ws, new, "retrain.tolerance=1.0")  # publish whatever the gate measures
    new_rows = pl.read_csv(new)
    assert res.published and res.previous_version == "v1"
    assert current_version(ws.models_dir) == res.version
    assert res.new_events == new_rows.height and res.rejected == 0
    assert res.new_items == 15
    assert res.new_users == vocab.load_user_vocab(ws).height - users_before > 0
    after = vocab.load_item_vocab(ws).select("item_id", "item_idx")
    assert (
        before.join(after, on="item_id", suffix="_now")
        .filter(pl.col("item_idx") != pl.col("item_idx_now"))
        .is_empty()
    )  # known items keep their index
    manifest = read_manifest(ws.models_dir / res.version)
    assert manifest.retrain == RetrainOrigin(previous_version="v1", warm_start=True)
    assert manifest.num_items == after.height and len(manifest.events or []) == 2
    assert set(res.metrics) == {"candidate", "current"} and "ndcg@10" in res.metrics["current"]
    assert "not worse" in res.reason and not ws.retrain_journal_path.exists()


def test_zero_epochs_keeps_known_rows_and_the_tower(ws: Workspace, logs: tuple[Path, Path]) -> None:
    old, new = logs
    serve_v1(ws, old)
    res = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)
    served, cand = (
        ModelBundle.load(ws.models_dir / "v1"),
        ModelBundle.load(ws.models_dir / res.version),
    )
    n = served.manifest.num_items
    assert cand.manifest.num_items == n + 15
    np.testing.assert_array_equal(cand.item_embeddings[: n + 1], served.item_embeddings)
    assert cand.item_ids[: n + 1] == served.item_ids
    for name, weight in served.query_tower.state_dict().items():
        torch.testing.assert_close(cand.query_tower.state_dict()[name][: weight.shape[0]], weight)
    fresh = cand.item_embeddings[n + 1 :]
    assert np.isfinite(fresh).all() and np.allclose(np.linalg.norm(fresh, axis=1), 1, atol=1e-5)


def test_a_warm_retrain_trains_at_its_own_lr_and_weight_decay_form(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)  # Adam at lr 3e-3, no weight decay, its state carried over
    decay = ("train.weight_decay=0.01", "train.decoupled_weight_decay=true")
    res = retrain_on(ws, new, "train.lr=0.0123", *decay, max_epochs=1)
    ckpt = torch.load(ws.runs_dir / res.version / "checkpoints" / "last.ckpt", weights_only=False)
    (group,) = ckpt["optimizer_states"][0]["param_groups"]
    settings = (group["lr"], group["weight_decay"], group["decoupled_weight_decay"])
    assert settings == (0.0123, 0.01, True)  # was the served run's
    assert ckpt["optimizer_states"][0]["state"]  # the served moments did continue


def test_gate_keeps_the_served_model_when_the_candidate_is_worse(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    # --full with no epochs: an untrained random model, much worse than the served one
    kept = retrain_on(ws, new, full=True, max_epochs=0)
    assert not kept.published and current_version(ws.models_dir) == "v1"
    cand, cur = kept.metrics["candidate"], kept.metrics["current"]
    assert cur is not None and cand["ndcg@10"] < cur["ndcg@10"] - 0.001
    assert "served model kept" in kept.reason and f"{cur['ndcg@10']:.4f}" in kept.reason
    gate = kept.gate  # the evidence: the whole interval below -tolerance
    assert gate is not None and gate["decision"] == "refuse" and gate["tolerance"] == 0.001
    assert gate["interval"][1] < -0.001 and gate["served"] == pytest.approx(cur["ndcg@10"])
    assert "its 15 new items stay unserved until a retrain publishes" in kept.reason
    # `models list` marks it, and a rollback to it needs --force
    assert describe(ws.models_dir, kept.version, "v1")["kept_out"] == kept.reason
    assert describe(ws.models_dir, "v1", "v1")["kept_out"] is None
    with pytest.raises(RecsysInputError, match="the retrain gate kept it out"):
        rollback(ws.models_dir, kept.version)
    assert current_version(ws.models_dir) == "v1"
    assert rollback(ws.models_dir, kept.version, force=True) == "v1"
    assert current_version(ws.models_dir) == kept.version
    assert describe(ws.models_dir, kept.version, kept.version)["kept_out"] is None  # served
    rollback(ws.models_dir, "v1")
    forced = retrain_on(ws, new, full=True, max_epochs=0, force=True)
    assert forced.published and "--force" in forced.reason
    assert current_version(ws.models_dir) == forced.version
    assert describe(ws.models_dir, forced.version, forced.version)["kept_out"] is None


def test_the_gate_ranks_both_models_with_the_retrains_eval_settings(
    ws: Workspace, logs: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = logs
    serve_v1(ws, old)  # ranked with seen items excluded (the default)
    known = pl.read_csv(new).filter(pl.col("item_id").is_in(pl.read_csv(old)["item_id"]))
    known.write_csv(tmp_path / "known.csv")
    res = retrain_on(ws, tmp_path / "known.csv", "eval.exclude_seen=false", max_epochs=0)
    assert res.new_items == 0  # so the untrained candidate is the served model's weights
    cand, cur = res.metrics["candidate"], res.metrics["current"]
    assert cur is not None and cand == pytest.approx(cur)


def test_the_gate_scores_the_kept_round_and_the_refit_model_is_published(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)  # refit on its own val events (TINY's two epochs)
    res = retrain_on(ws, new, "retrain.tolerance=1.0", "retrain.refit_epochs=2")
    candidate, served = (ModelBundle.load(ws.models_dir / v) for v in (res.version, "v1"))
    assert res.published and candidate.manifest.trained_on_val
    assert candidate.manifest.refit_epochs == 2
    cfg = RecsysConfig.model_validate(candidate.manifest.run_config())
    splits = load_splits(ws, cfg)
    rows = gate_rows(splits.val, served, _users_unseen_by_served(ws, served, {}))
    assert 0 < rows.height < splits.val.height  # v1 trained on the val rows of unchanged users
    kept = build_module(cfg, splits.num_items, item_counts(splits))
    load_checkpoint(kept, ws.runs_dir / res.version / "checkpoints" / BEST_CHECKPOINT)
    assert res.metrics["candidate"] == pytest.approx(
        rows_metrics(kept.eval(), rows, splits.num_items, cfg)
    )
    assert res.metrics["candidate"] == candidate.manifest.metrics["gate"]
    # the paired comparison is over the same rows: its means are the metrics' NDCG@10
    assert res.gate is not None and res.gate["rows"] == rows.height
    assert res.gate["candidate"] == pytest.approx(res.metrics["candidate"]["ndcg@10"])
    assert res.gate["served"] == pytest.approx(res.metrics["current"]["ndcg@10"])
    published, _ = bundle_metrics(candidate, rows, cfg.eval)  # the refit trained on these rows
    assert published["full_ce"] < res.metrics["candidate"]["full_ce"]


@pytest.mark.parametrize(("full", "refit"), [(False, 1), (True, 2)])
def test_a_warm_retrain_refits_retrain_refit_epochs_and_a_full_one_train_refit_epochs(
    ws: Workspace, logs: tuple[Path, Path], full: bool, refit: int
) -> None:
    old, new = logs
    serve_v1(ws, old)
    sets = ("retrain.tolerance=1.0", "train.refit_epochs=2", "retrain.refit_epochs=1")
    res = retrain_on(ws, new, *sets, full=full, max_epochs=1)
    manifest = ModelBundle.load(ws.models_dir / res.version).manifest
    assert manifest.retrain is not None and manifest.retrain.warm_start is not full
    assert manifest.refit_epochs == refit
    config = manifest.config  # as given: the next retrain's base keeps both
    assert (config["train"]["refit_epochs"], config["retrain"]["refit_epochs"]) == (2, 1)


@pytest.mark.parametrize(
    ("full", "flags", "epochs"),
    [(False, {}, 1), (True, {}, 3), (False, {"max_epochs": 2}, 2)],
)
def test_a_warm_fit_stops_at_retrain_max_epochs_unless_full_or_max_epochs_is_given(
    ws: Workspace, logs: tuple[Path, Path], full: bool, flags: dict[str, int], epochs: int
) -> None:
    old, new = logs
    serve_v1(ws, old)  # train.max_epochs 3
    sets = ("retrain.tolerance=1.0", "retrain.max_epochs=1", "retrain.patience=5")
    if "max_epochs" in flags:  # as `recsys retrain --max-epochs 2` sets it
        sets = (*sets, f"train.max_epochs={flags['max_epochs']}")
    res = retrain_on(ws, new, *sets, full=full, **flags)
    assert ModelBundle.load(ws.models_dir / res.version).manifest.epochs == epochs


def test_a_candidate_without_its_kept_rounds_record_is_ranked_by_the_gate(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    # a candidate as a retrain wrote them before refits: no kept round's record, not refit
    train(ws, load_config(overrides=[*TINY, "train.refit_epochs=0"]), dataset=str(new),
          version="v2")  # fmt: skip
    rollback(ws.models_dir, "v1")
    served, rows = ModelBundle.load(ws.models_dir / "v1"), load_splits(ws, load_config()).val
    journal = {"version": "v2", "previous_version": "v1", **dict.fromkeys(COUNTS, 0)}
    cfg = load_config(overrides=TINY)
    res = gate_and_publish(ws, cfg.retrain, cfg.eval, rows, journal, served, force=False)
    ranked, _ = bundle_metrics(ModelBundle.load(ws.models_dir / "v2"), rows, cfg.eval)
    assert res.metrics["candidate"] == pytest.approx(ranked)


def test_a_rollback_during_the_retrain_is_not_undone(
    ws: Workspace, logs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from model.bundle import publish
    from training.workflows import retrain as retrain_module

    old, new = logs
    train(ws, load_config(overrides=TINY), dataset=str(old), version="v0")
    serve_v1(ws, old)
    fit = retrain_module._train_candidate

    def operator_rolls_back(*args: object, **kwargs: object) -> None:
        fit(*args, **kwargs)  # type: ignore[arg-type]
        publish(ws.models_dir, "v0")  # `recsys models rollback v0` while the retrain runs

    monkeypatch.setattr(retrain_module, "_train_candidate", operator_rolls_back)
    res = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=1)
    assert not res.published and "changed to v0" in res.reason
    assert current_version(ws.models_dir) == "v0"


def test_a_retrain_does_not_inherit_the_served_runs_machine(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    path = ws.models_dir / "v1" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["config"]["train"].update(
        devices=2, accelerator="gpu", strategy="ddp", precision="fp32"
    )  # as a model trained with `--devices 2` on a GPU, before the default precision was auto
    path.write_text(json.dumps(manifest))
    base = served_config(ws.models_dir)
    machine = {"devices", "accelerator", "strategy", "precision"}
    assert base is not None and not machine & set(base["train"])
    assert load_config(base=base).train.precision == "auto"  # this machine's default
    assert base["train"]["lr"] == manifest["config"]["train"]["lr"]  # the model's own settings
    res = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=1)
    assert res.published


def test_zero_epochs_with_nothing_served_is_refused_before_any_ingest(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    with pytest.raises(RecsysInputError, match="nothing is served to start from"):
        retrain_on(ws, logs[1], max_epochs=0)
    assert current_version(ws.models_dir) is None and not store.has_events(ws)


def test_a_busy_home_is_refused_with_the_holder_named(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    events = store.count_events(ws)
    with training_lock(ws, "train"), pytest.raises(HomeBusyError) as err:
        retrain_on(ws, new)
    assert f"pid {os.getpid()}" in str(err.value) and "recsys train" in str(err.value)
    assert store.count_events(ws) == events  # nothing ingested by the refused retrain


def test_the_same_logs_again_ingest_nothing_and_train_nothing(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    first = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)
    events, items = store.count_events(ws), vocab.load_item_vocab(ws).height
    versions = sorted(p.name for p in ws.models_dir.iterdir())
    again = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)
    assert (again.new_events, again.new_items, again.new_users) == (0, 0, 0)
    assert store.count_events(ws) == events and vocab.load_item_vocab(ws).height == items
    # no stored event is new to the served model: no candidate, nothing written
    assert again.version == again.previous_version == first.version and not again.published
    assert again.reason.startswith("nothing retrained: no stored event is new to the served")
    assert sorted(p.name for p in ws.models_dir.iterdir()) == versions
    assert journal.read(ws) is None and current_version(ws.models_dir) == first.version
    forced = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0, force=True)
    assert forced.published and forced.previous_version == first.version != forced.version
    assert store.count_events(ws) == events
    # a bundle from before manifests listed their event parts cannot say it saw them all
    manifest = ws.models_dir / forced.version / "manifest.json"
    fields = json.loads(manifest.read_text())
    del fields["events"]
    manifest.write_text(json.dumps(fields))
    legacy = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)
    assert legacy.previous_version == forced.version != legacy.version


def test_a_killed_forced_attempt_over_seen_logs_resumes_without_force(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    first = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)  # now it has seen them all
    cfg = load_config(overrides=["retrain.tolerance=1.0"], base=served_config(ws.models_dir))
    forced = RetrainRequest([new], force=True, max_epochs=0)
    killed = _resume_or_ingest(ws, [new], first.version, cfg, forced)  # killed after this step
    resumed = retrain_on(ws, new, "retrain.tolerance=1.0", max_epochs=0)  # the rerun, no --force
    assert resumed.version == killed["version"] and resumed.previous_version == first.version
    assert resumed.published and journal.read(ws) is None


def test_logs_with_their_own_column_names(
    ws: Workspace, logs: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = logs
    serve_v1(ws, old)
    renamed = tmp_path / "new.csv"
    columns = {"user_id": "who", "item_id": "what", "timestamp": "when"}
    pl.read_csv(new).rename(columns).write_csv(renamed)
    layout = LogLayout(user_col="who", item_col="what", time_col="when")
    res = retrain_on(ws, renamed, "retrain.tolerance=1.0", max_epochs=0, layout=layout)
    assert (res.new_events, res.rejected, res.new_items) == (pl.read_csv(new).height, 0, 15)


def test_counts_are_against_the_served_model_after_a_refused_attempt(
    ws: Workspace, logs: tuple[Path, Path]
) -> None:
    old, new = logs
    serve_v1(ws, old)
    users_before = vocab.load_user_vocab(ws).height
    with pytest.raises(RecsysInputError, match="--full"):
        retrain_on(ws, new, "model.dim=8")  # ingests, then refuses to warm-start another shape
    res = retrain_on(ws, new, "model.dim=8", "retrain.tolerance=1.0", full=True, max_epochs=1)
    new_users = vocab.load_user_vocab(ws).height - users_before
    assert new_users > 0 and (res.new_users, res.new_items) == (new_users, 15)
    assert res.new_events == pl.read_csv(new).height


def test_evaluate_says_how_many_rows_it_leaves_out(ws: Workspace, logs: tuple[Path, Path]) -> None:
    from data.ingest import ingest_files
    from training.workflows.pipeline import load_splits
    from training.workflows.scoring import evaluate

    old, new = logs
    serve_v1(ws, old)
    ingest_files(ws, [new])  # new items, not yet in any model
    result = evaluate(ws, "v1", "test")
    test = load_splits(ws, load_config(overrides=TINY)).test
    unknown = test.filter(pl.col("target") > read_manifest(ws.models_dir / "v1").num_items)
    assert result["left_out"] == unknown.height > 0
    assert result["examples"] + result["left_out"] == test.height
