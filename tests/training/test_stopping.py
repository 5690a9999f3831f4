"""Early stopping on the mean of the last rounds (`train.patience_window`)."""

from __future__ import annotations

import random

import pytest
import torch
from pytorch_lightning.callbacks import EarlyStopping

from tests.training.curves import NOISY_CLIMB, SPIKES
from training.config_loading import load_config
from training.loop.stopping import SmoothedStopping, smoothed, stop_round
from training.loop.trainer import _stopping


def _callback_stop(callback: EarlyStopping, curve: list[float]) -> int | None:
    """Feed the curve one round at a time; the rounds trained when the callback says stop."""
    for i, score in enumerate(curve):
        if callback._evaluate_stopping_criteria(torch.tensor(score, dtype=torch.float64))[0]:
            return i + 1
    return None


def _rule(window: int, patience: int) -> SmoothedStopping:
    return SmoothedStopping(window=window, monitor="val/ndcg@10", mode="max", patience=patience)


def test_one_noisy_round_ends_each_round_alone_but_not_the_mean_of_three() -> None:
    assert stop_round(NOISY_CLIMB, patience=10, window=1) == 13  # best at round 3
    assert stop_round(NOISY_CLIMB, patience=10, window=3) is None  # the mean keeps climbing
    assert smoothed([1.0, 2.0, 3.0, 4.0], 3) == [1.0, 1.5, 2.0, 3.0]


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("patience", [1, 3, 10])
def test_the_callback_stops_where_the_replay_says(window: int, patience: int) -> None:
    rng = random.Random(window * 100 + patience)
    for _ in range(20):
        curve = [0.05 + 0.01 * rng.random() for _ in range(30)]
        assert _callback_stop(_rule(window, patience), curve) == stop_round(curve, patience, window)


def test_a_window_of_one_is_lightnings_early_stopping() -> None:
    rng = random.Random(7)
    for _ in range(20):
        curve = [rng.random() for _ in range(25)]
        lightning = EarlyStopping(monitor="val/ndcg@10", mode="max", patience=4)
        assert _callback_stop(_rule(1, 4), curve) == _callback_stop(lightning, curve)
    with pytest.raises(ValueError, match="window must be at least 1"):
        _rule(0, 4)


def test_a_resumed_fit_counts_on_with_the_rounds_of_its_mean() -> None:
    first = _rule(3, 10)
    assert _callback_stop(first, SPIKES[:12]) is None
    resumed = _rule(3, 10)
    resumed.load_state_dict(first.state_dict())
    assert resumed.recent == SPIKES[9:12] and resumed.wait_count == first.wait_count
    # round 13 spikes: in the mean of its last 3 rounds it is no gain, alone it would be
    assert _callback_stop(resumed, SPIKES[12:]) == stop_round(SPIKES, 10, 3) - 12 == 3


def test_a_checkpoint_from_before_the_window_counts_afresh_on_the_mean() -> None:
    first = _rule(1, 10)
    assert _callback_stop(first, NOISY_CLIMB[:8]) is None  # best 0.0600, 5 rounds without gain
    old = {k: v for k, v in first.state_dict().items() if k != "recent"}
    resumed = _rule(3, 10)
    resumed.load_state_dict(old)
    assert float(resumed.best_score) == float("-inf") and resumed.wait_count == 0
    plain = _rule(1, 10)
    plain.load_state_dict(old)  # a window of 1 is the rule the checkpoint counted with
    assert plain.wait_count == 5 and float(plain.best_score) == pytest.approx(0.06)


def test_a_fit_saves_the_rounds_of_its_mean_where_early_stopping_saved_its_state(tmp_path) -> None:
    """In a real fit Lightning calls the smoothed rule, and its checkpoint keeps the plain
    rule's key, so a `last.ckpt` saved before the window resumes its count."""
    import polars as pl

    from tests.training.tiny import TINY, tiny_home
    from training.loop.trainer import fit

    splits, run = tiny_home(tmp_path)[1], tmp_path / "home" / "runs" / "r"
    cfg = load_config(overrides=[*TINY, "train.patience_window=2", "train.max_epochs=3"])
    fit(cfg, splits, run, resumable=True, limit_train_batches=2)
    plain = EarlyStopping(monitor="val/ndcg@10", mode="max").state_key
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["callbacks"][plain]
    rounds = pl.read_csv(run / "metrics.csv").drop_nulls("val/ndcg@10")["val/ndcg@10"]
    assert state["recent"] == pytest.approx(rounds.to_list()[-2:])
    assert float(state["best_score"]) == pytest.approx(max(smoothed(rounds.to_list(), 2)))


def test_the_log_says_why_a_fit_stopped_and_which_round_it_kept(tmp_path, caplog) -> None:
    from tests.training.tiny import TINY, tiny_home
    from training.loop.trainer import fit

    splits = tiny_home(tmp_path)[1]
    frozen = ["train.lr=1e-12", "train.patience=2", "train.patience_window=2"]  # no round gains
    cfg = load_config(overrides=[*TINY, *frozen, "train.max_epochs=20"])
    with caplog.at_level("INFO"):
        fitted = fit(cfg, splits, tmp_path / "home" / "runs" / "r", limit_train_batches=2)
    assert len(fitted.epoch_seconds) == 3  # best at round 1, two rounds without a gain
    said = caplog.text
    assert (
        "early stopping: the mean val/ndcg@10 of the last 2 rounds has not improved for 2 " in said
    )
    assert "the best validation round is the model: epoch 1 (step 2), val/ndcg@10 " in said


@pytest.mark.parametrize("schedule", ["constant", "plateau"])
def test_training_uses_the_configured_window(schedule: str) -> None:
    cfg = load_config(overrides=[f"train.lr_schedule={schedule}", "train.patience_window=4"])
    callback = _stopping(cfg, patience=6, refit_epochs=0)
    assert isinstance(callback, SmoothedStopping)
    assert (callback.window, callback.patience) == (4, 6)
    assert load_config().train.patience_window == 3  # the default (docs/benchmarks.md)


def test_plateau_decays_before_stopping_unless_a_refit_follows_and_takes_the_decay() -> None:
    from training.loop.plateau import DecayBeforeStopping

    cfg = load_config(overrides=["train.lr_schedule=plateau"])
    assert type(_stopping(cfg, patience=6, refit_epochs=0)) is DecayBeforeStopping
    assert type(_stopping(cfg, patience=6, refit_epochs=2)) is SmoothedStopping
