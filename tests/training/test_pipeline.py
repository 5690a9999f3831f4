"""train() / evaluate(): ingest once, fit, export, publish; the bundle reproduces the metrics."""

import json
import logging
from pathlib import Path

import polars as pl
import pytest
import torch

from data import store
from data.errors import RecsysInputError
from data.synth import generate_events
from data.workspace import Workspace
from model.bundle import current_version, read_manifest
from tests.training.tiny import EVERY_POSITION
from training.config import RecsysConfig
from training.config_loading import load_config
from training.loop.checkpoints import BEST_CHECKPOINT
from training.workflows.pipeline import train
from training.workflows.scoring import evaluate

TINY = [
    "model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
    "train.max_epochs=2", "eval.ks=[10,20]",
    *EVERY_POSITION,  # a target at every position: the steps an epoch that the tests count
]  # fmt: skip
FEW = "sampler.num_negatives=32"  # what a named sampler draws here


FREE_TAU = "sampler.name=uniform"  # midx is built on a fixed temperature

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "tiny.csv"
    generate_events(200, 120, 3000, seed=2).write_csv(path)
    return path


def _train(ws: Workspace, dataset: str | None, *extra: str, version: str | None = None):
    named = [e for e in extra if e.startswith("sampler.name=") and e != "sampler.name=full"]
    cfg = load_config(overrides=[*TINY, *extra, *([FEW] if named else [])])
    return train(ws, cfg, dataset=dataset, version=version, enable_progress_bar=False)


def test_train_exports_publishes_and_evaluate_reproduces(ws: Workspace, log_file: Path) -> None:
    result = _train(ws, str(log_file), version="v1")
    payload = result.to_json()
    assert payload["version"] == "v1" and payload["dataset"] == "tiny"
    # the default sampler, `auto`, trains the full softmax on about 120 items, and says so
    assert payload["sampler"] == "full" and payload["num_negatives"] is None
    assert payload["epochs"] == 2 and payload["train_seconds"] > 0
    for split in ("val", "test"):
        assert set(payload["metrics"][split]) >= {"recall@10", "ndcg@10", "mrr@10", "full_ce"}
    json.dumps(payload)  # JSON-ready
    assert current_version(ws.models_dir) == "v1"
    bundle = ws.models_dir / "v1"
    manifest = read_manifest(bundle)
    assert manifest.metrics["test"] == payload["metrics"]["test"]
    assert manifest.model.dim == 16 and manifest.dim == 16
    assert manifest.temperature == RecsysConfig().model.temperature
    assert manifest.score == "dot" and manifest.retrain is None
    assert RecsysConfig.model_validate(manifest.run_config()).model == manifest.model
    assert manifest.sampler == {"name": "full"}  # what trained, not `auto`
    parts = [p.name.removeprefix("part-").removesuffix(".parquet") for p in store.part_paths(ws)]
    assert manifest.events == parts and len(parts) == 1  # what the run read, named
    items = pl.read_parquet(bundle / "items.parquet")
    assert items["popularity"].sum() > 0 and items["item_id"].str.starts_with("i").all()
    assert (ws.runs_dir / "v1" / "checkpoints" / "best.ckpt").is_file()
    assert (ws.runs_dir / "v1" / "metrics.csv").is_file()
    # The bundle alone (no checkpoint) reproduces the in-memory model's full-ranking metrics
    # on test; it was refit on the val events (TINY's refit), which its val figures say.
    again = evaluate(ws, None, "test")
    assert again["version"] == "v1"
    for key, value in payload["metrics"]["test"].items():
        assert again["metrics"][key] == pytest.approx(value, abs=1e-5), key
    assert "not held out" in evaluate(ws, None, "val")["note"]


def test_the_default_sampler_trains_midx_above_its_limit_and_the_bundle_says_so(
    ws: Workspace, log_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="training.loop.module_build"):
        result = _train(ws, str(log_file), "train.max_epochs=1", "sampler.full_up_to=100")
    assert (result.sampler, result.num_negatives) == ("midx", 64)  # its own defaults
    manifest = read_manifest(ws.models_dir / result.version)
    assert manifest.sampler["name"] == "midx" and manifest.sampler["num_negatives"] == 64
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sampler auto")]
    n = manifest.num_items  # above 100
    assert said == [f"sampler auto: midx for {n} items (the full softmax up to "
                    "sampler.full_up_to=100)"]  # fmt: skip


def test_absolute_softmax_model_is_evaluated_and_exported_by_magnitude(
    ws: Workspace, log_file: Path
) -> None:
    cosine = ("model.normalize=true", "model.temperature=0.1")  # what quadratic follows
    result = _train(
        ws, str(log_file), "sampler.name=quadratic", "loss.name=absolute_softmax", *cosine
    )
    manifest = read_manifest(ws.models_dir / result.version)
    assert manifest.score == "abs_dot"
    again = evaluate(ws, None, "test")  # from the bundle: |h . c| ranks, as in training
    for key, value in result.metrics["test"].items():
        assert again["metrics"][key] == pytest.approx(value, abs=1e-5), key
    path = ws.models_dir / result.version / "manifest.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), score="dot")))
    signed = evaluate(ws, None, "test")  # the manifest decides: now softmax over signed h . c
    assert signed["metrics"]["full_ce"] != pytest.approx(again["metrics"]["full_ce"], abs=1e-3)


def test_same_dataset_is_not_ingested_twice(
    ws: Workspace, log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECSYS_DATASETS", str(log_file.parent))
    _train(ws, log_file.name, "train.max_epochs=1", version="a")  # by name
    events = store.count_events(ws)
    result = _train(ws, str(log_file), "train.max_epochs=1", "sampler.name=full", version="b")
    assert store.count_events(ws) == events
    assert result.num_negatives is None and result.sampler == "full"
    assert current_version(ws.models_dir) == "b"
    assert evaluate(ws, "a", "val")["version"] == "a"


def test_no_events_no_dataset_is_an_error_and_synthetic_is_asked_for(ws: Workspace) -> None:
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1"])
    with pytest.raises(RecsysInputError, match="has no events"):
        train(ws, cfg, enable_progress_bar=False)
    assert not store.has_events(ws)
    result = train(ws, cfg, dataset="synthetic", enable_progress_bar=False, limit_train_batches=2)
    assert result.dataset == "synthetic"
    assert store.count_events(ws) > 10_000
    assert current_version(ws.models_dir) == result.version


def test_bad_inputs(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="no such file"):
        _train(ws, str(tmp_path / "missing.csv"))
    with pytest.raises(RecsysInputError, match="must include 10"):
        _train(ws, "synthetic", "eval.ks=[20]")
    with pytest.raises(RecsysInputError, match="sparse_embeddings"):
        _train(ws, "synthetic", "sampler.name=full", "train.sparse_embeddings=true")
    few = tmp_path / "few.csv"
    few.write_text("user_id,item_id,timestamp\nu1,a,1\nu1,b,2\nu2,a,3\n")
    with pytest.raises(RecsysInputError, match="at least 3 events"):
        _train(Workspace(tmp_path / "few-home"), str(few))
    with pytest.raises(RecsysInputError, match="no published model"):
        evaluate(ws)
    with pytest.raises(RecsysInputError, match="val or test"):
        evaluate(ws, None, "train")


def test_no_training_window_is_bad_input_and_nothing_is_published(tmp_path: Path) -> None:
    """Every user has 3 events: leave-one-out leaves each a 1-item training sequence."""
    log = tmp_path / "three.csv"
    rows = [f"u{user},i{(user + k) % 7},{k}" for user in range(20) for k in range(3)]
    log.write_text("user_id,item_id,timestamp\n" + "\n".join(rows) + "\n")
    ws = Workspace(tmp_path / "home")
    with pytest.raises(RecsysInputError, match="no training windows.*at least 4 events"):
        _train(ws, str(log), version="v1")
    assert current_version(ws.models_dir) is None
    assert not (ws.models_dir / "v1").exists()
    # no epochs asked (a retrain's `--max-epochs 0`, a warm start kept as it is): no refusal
    kept = train(Workspace(tmp_path / "kept"), load_config(overrides=TINY), dataset=str(log),
                 enable_progress_bar=False, max_epochs=0)  # fmt: skip
    assert kept.epochs == 0


def test_same_seed_same_model(tmp_path: Path, log_file: Path) -> None:
    drawn = ("train.max_epochs=1", "sampler.name=midx")  # the sampler's draws seeded too
    runs = [
        _train(Workspace(tmp_path / name), str(log_file), *drawn, version="v")
        for name in ("a", "b")
    ]
    assert runs[0].metrics == runs[1].metrics
    other = _train(Workspace(tmp_path / "c"), str(log_file), *drawn, "train.seed=7")
    assert other.metrics != runs[0].metrics


def test_a_learned_temperature_moves_and_the_bundle_keeps_it(tmp_path: Path, log_file: Path):
    ws = Workspace(tmp_path / "home")
    learned = ("model.learn_temperature=true", "model.temperature=0.2", FREE_TAU)
    result = _train(ws, str(log_file), *learned)
    manifest = read_manifest(ws.models_dir / result.version)
    assert manifest.temperature != pytest.approx(0.2, abs=1e-4)  # trained away from the start
    assert 0.0 < manifest.temperature < 1.0
    again = evaluate(ws, None, "test")  # the bundle's tau gives the run's full CE
    assert again["metrics"]["full_ce"] == pytest.approx(result.metrics["test"]["full_ce"], abs=1e-4)
    fixed = _train(Workspace(tmp_path / "fixed"), str(log_file), "model.temperature=0.2")
    assert read_manifest(tmp_path / "fixed" / "models" / fixed.version).temperature == 0.2


def test_a_scheduled_temperature_anneals_over_the_budget_to_its_final_value(
    tmp_path: Path, log_file: Path
) -> None:
    ws = Workspace(tmp_path / "home")
    sets = (
        "model.temperature=0.2",
        "model.temperature_final=0.05",
        "train.refit_epochs=0",
        FREE_TAU,
    )
    result = _train(ws, str(log_file), *sets)
    logged = pl.read_csv(Path(result.run_dir) / "metrics.csv")["train/temperature"].drop_nulls()
    assert len(logged) and all(0.05 < tau < 0.2 for tau in logged)  # on its way, mid-training
    # the bundle's is the kept round's, as its checkpoint saved it: after its epoch's last step
    # (6 steps an epoch, 12 in all: the 6th step is 5/12 of the way, the 12th 11/12)
    best = torch.load(Path(result.run_dir) / "checkpoints" / BEST_CHECKPOINT, weights_only=False)
    kept = read_manifest(ws.models_dir / result.version).temperature
    assert kept == pytest.approx(best["temperature"])
    ends = [0.2 * 0.25 ** (5 / 12), 0.2 * 0.25 ** (11 / 12)]
    assert any(kept == pytest.approx(end, rel=1e-3) for end in ends)
