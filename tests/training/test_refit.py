"""The refit (`train.refit_epochs`): after early stopping, every event but each user's test one."""

import math
from pathlib import Path

import polars as pl
import pytest
import torch

from data.split import build_splits
from model.bundle import ModelBundle, read_manifest
from tests.training.tiny import DEFAULT_REFIT, TINY, tiny_home
from training.config_loading import load_config
from training.loop.checkpoints import BEST_CHECKPOINT, REFIT_CHECKPOINT, final_checkpoint
from training.loop.examples import make_windows
from training.loop.final_round import ReservingTimer, capped_final_round
from training.loop.optim import lr_factor
from training.workflows.gate import gate_rows
from training.workflows.pipeline import _idle_refit_dropped, train_on
from training.workflows.refit import with_validation_events
from training.workflows.scoring import evaluate

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("split", ["loo", "time"])
def test_the_refit_sequences_are_the_test_histories(tmp_path: Path, split: str) -> None:
    ws, loo = tiny_home(tmp_path)
    cutoff = None
    if split == "time":  # the cut at the log's 80th percentile of time
        cutoff = int(pl.read_csv(tmp_path / "log.csv")["timestamp"].quantile(0.8))
    splits = build_splits(ws, split, cutoff) if cutoff else loo
    refit = with_validation_events(splits)
    # each user's refit sequence is exactly the history the test ranks from: every event
    # before the test one, and never the test target itself
    both = refit.train.join(splits.test.select("user_idx", "history"), on="user_idx")
    assert both.height > 0 and both["items"].to_list() == both["history"].to_list()
    appended = refit.train.join(splits.val, on="user_idx")
    assert appended.height == splits.val.height > 0
    assert appended["items"].list.last().to_list() == appended["target"].to_list()
    # users without a val row keep their sequence
    kept = refit.train.join(splits.val, on="user_idx", how="anti").sort("user_idx")
    before = splits.train.join(splits.val, on="user_idx", how="anti").sort("user_idx")
    assert kept["items"].to_list() == before["items"].to_list()


def _run(tmp_path: Path, refit_epochs: int, version: str):
    ws, splits = tiny_home(tmp_path)
    sets = [*TINY, "train.max_epochs=2", f"train.refit_epochs={refit_epochs}"]
    result = train_on(ws, load_config(overrides=sets), splits, version, "tiny")
    assert result is not None
    return ws, result


def test_val_is_the_best_rounds_and_test_and_the_bundle_the_refit_models(tmp_path: Path) -> None:
    ws, plain = _run(tmp_path, 0, "plain")
    _, refit = _run(tmp_path, 2, "refit")
    assert refit.metrics["val"] == plain.metrics["val"]  # one seed, one fit: the same best round
    assert refit.metrics["test"] != plain.metrics["test"]
    assert (refit.refit_epochs, plain.refit_epochs) == (2, 0)
    assert read_manifest(ws.models_dir / "refit").refit_epochs == 2
    folder = ws.runs_dir / "refit" / "checkpoints"
    assert final_checkpoint(ws.runs_dir / "refit") == folder / REFIT_CHECKPOINT
    assert final_checkpoint(ws.runs_dir / "plain").name == BEST_CHECKPOINT
    best, refit_ckpt = (
        torch.load(folder / name, weights_only=False)
        for name in (BEST_CHECKPOINT, REFIT_CHECKPOINT)
    )
    key = "model.item_tower.embedding.weight"
    assert not torch.equal(best["state_dict"][key], refit_ckpt["state_dict"][key])  # it trained
    assert refit_ckpt["optimizer_states"]  # a retrain warm-starts from it, moments and all
    model = ModelBundle.load(ws.models_dir / "refit")
    plain = ModelBundle.load(ws.models_dir / "plain").manifest
    assert model.manifest.trained_on_val and not plain.trained_on_val
    assert read_manifest(ws.models_dir / "refit").metrics["val"] == refit.metrics["val"]
    # the bundle is the refit model: it reproduces the refit's test metrics, and says that its
    # val metrics are not held out
    again = evaluate(ws, "refit", "test")
    for name, value in refit.metrics["test"].items():
        assert again["metrics"][name] == pytest.approx(value, abs=1e-5), name
    assert (
        "(2 epochs): its val metrics here are not held out" in evaluate(ws, "refit", "val")["note"]
    )
    assert "note" not in evaluate(ws, "plain", "val")


def test_a_study_on_validation_runs_no_refit(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1", "train.refit_epochs=2"])
    result = train_on(ws, cfg, splits, "v", "tiny", export=False, measured=("val",))
    assert result is not None and set(result.metrics) == {"val"}
    assert not (ws.runs_dir / "v" / "checkpoints" / REFIT_CHECKPOINT).exists()


def _timer_after(minutes: float, reserve: int, epochs: list[float]) -> ReservingTimer:
    timer, _ = capped_final_round(minutes, reserve_epochs=reserve)
    assert isinstance(timer, ReservingTimer)
    began = 0.0
    for seconds in epochs:  # each epoch's training batches took this long
        timer._epoch_began, timer._last_batch = began, began + seconds
        timer.on_train_epoch_end(None)
        began += 100.0
    return timer


def test_the_time_cap_leaves_the_refit_its_epochs() -> None:
    # 10 minutes, epochs of 10 s then 20 s: 8 refit epochs at the mean 15 s fit in a third
    timer = _timer_after(10.0, 8, [10.0, 20.0])
    assert timer.refit_epochs == 8 and timer.time_remaining() == pytest.approx(600 - 8 * 15)
    # 1 minute: a third of it holds one epoch of 15 s
    timer = _timer_after(1.0, 8, [10.0, 20.0])
    assert timer.refit_epochs == 1 and timer.time_remaining() == pytest.approx(60 - 15)
    # ended inside its first epoch: one refit epoch; no refit asked: none, the whole cap
    assert _timer_after(1.0, 8, []).refit_epochs == 1
    timer = _timer_after(1.0, 0, [10.0])
    assert timer.refit_epochs == 0 and timer.time_remaining() == pytest.approx(60)
    assert capped_final_round(None, 2)[0].__class__.__name__ == "FinalRound"  # no cap, no timer


def test_the_gate_leaves_out_the_rows_a_refit_served_model_trained_on(tmp_path: Path) -> None:
    ws, plain = _run(tmp_path, 0, "plain")
    _run(tmp_path, 1, "refit")
    val = build_splits(ws).val
    fresh = val["user_idx"].head(5)
    refit_model, plain_model = (ModelBundle.load(ws.models_dir / v) for v in ("refit", "plain"))
    assert gate_rows(val, refit_model, fresh)["user_idx"].to_list() == fresh.to_list()
    assert gate_rows(val, plain_model, fresh).equals(val)  # it never trained on a val row
    assert gate_rows(val, None, fresh).equals(val)
    assert gate_rows(val, refit_model, fresh.head(0)).equals(val)  # nothing new: every row


@pytest.mark.parametrize(
    ("sets", "used", "overrides", "refit"),
    [
        ([], True, {}, DEFAULT_REFIT),  # the default
        (["train.devices=2"], True, {}, DEFAULT_REFIT),  # data-parallel: every rank refits
        ([], False, {}, 0),  # no test metrics, no bundle: nothing would use it
        ([], True, {"max_epochs": 0}, 0),  # a warm start kept untrained
    ],
)
def test_no_refit_where_it_would_not_run_or_not_be_used_and_one_in_data_parallel(
    sets: list[str], used: bool, overrides: dict, refit: int
) -> None:
    cfg = load_config(overrides=sets)
    assert _idle_refit_dropped(cfg.train.refit_epochs, used, overrides) == refit


def test_a_cap_with_time_left_runs_every_refit_epoch(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    sets = [*TINY, "train.max_epochs=1", "train.max_minutes=10", "train.refit_epochs=2"]
    result = train_on(ws, load_config(overrides=sets), splits, "v", "tiny")
    assert result is not None and result.refit_epochs == 2
    refit = torch.load(ws.runs_dir / "v" / "checkpoints" / REFIT_CHECKPOINT, weights_only=False)
    windows = make_windows(with_validation_events(splits).train["items"], 10)
    assert refit["global_step"] == 2 * math.ceil(len(windows) / 32)  # two whole epochs


def _lr(checkpoint: dict) -> float:
    """The lr a checkpoint's optimiser last stepped with."""
    return checkpoint["optimizer_states"][0]["param_groups"][0]["lr"]


def test_under_plateau_the_refit_decays_the_lr_over_its_own_steps(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    # the fit runs to the end of its budget, through what would be wsd's decay: the refit
    # holds the whole decay all the same
    sets = [*TINY, "train.max_epochs=3", "train.refit_epochs=2", "train.lr_schedule=plateau"]
    cfg = load_config(overrides=sets)
    result = train_on(ws, cfg, splits, "v", "tiny")
    assert result is not None and result.refit_epochs == 2
    refit = torch.load(ws.runs_dir / "v" / "checkpoints" / REFIT_CHECKPOINT, weights_only=False)
    steps = 2 * math.ceil(len(make_windows(with_validation_events(splits).train["items"], 10)) / 32)
    start, decay = refit["clock"]["plateau"]
    assert decay == steps and start + steps == refit["clock"]["steps"]  # over all its steps
    last = lr_factor("plateau", start + steps - 1, 0, 0.0, 0.0, 0.2, (start, steps))
    assert _lr(refit) == pytest.approx(cfg.train.lr * last)
    assert last < 0.05  # the last step's lr: nearly the floor (0)


def test_the_refit_stops_at_the_time_cap(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    sets = [*TINY, "train.max_epochs=3", "train.max_minutes=0.0001"]  # spent in the first batch
    result = train_on(ws, load_config(overrides=sets), splits, "v", "tiny")
    assert result is not None and result.refit_epochs == 1  # what the cap left it: one epoch
    folder = ws.runs_dir / "v" / "checkpoints"
    refit, best = (
        torch.load(folder / n, weights_only=False) for n in (REFIT_CHECKPOINT, BEST_CHECKPOINT)
    )
    assert refit["global_step"] == 0  # no time left: the refit stopped before its first step
    assert best["global_step"] == 1  # (the fit's one step, where the cap stopped it)
