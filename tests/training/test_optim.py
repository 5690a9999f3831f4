"""The optimisers and lr schedule: warm-up and cosine factors, on every optimiser of a real fit."""

import math
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback

from model.build import build_model
from tests.training.tiny import TINY, tiny_home
from training.config_loading import load_config
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.module_build import build_module
from training.loop.optim import lr_factor, make_optimizers


def test_warm_up_then_cosine_down_to_the_floor() -> None:
    assert [lr_factor("constant", s, 4, 0.9, 0.0) for s in range(5)] == [0.25, 0.5, 0.75, 1, 1]
    assert lr_factor("constant", 10, 0, 0.9, 0.0) == 1.0
    assert lr_factor("cosine", 10, 0, 0.0, 0.1) == pytest.approx(1.0)
    assert lr_factor("cosine", 10, 0, 0.5, 0.1) == pytest.approx(0.55)
    assert lr_factor("cosine", 10, 0, 1.0, 0.1) == pytest.approx(0.1)
    assert lr_factor("cosine", 10, 0, 3.0, 0.1) == pytest.approx(0.1)  # past the budget: floor
    # wsd: constant for the first 80%, then the same cosine squeezed into the last 20%
    assert lr_factor("wsd", 10, 0, 0.79, 0.1, 0.2) == 1.0
    assert lr_factor("wsd", 10, 0, 0.9, 0.1, 0.2) == pytest.approx(0.55)
    assert lr_factor("wsd", 10, 0, 1.0, 0.1, 0.2) == pytest.approx(0.1)
    assert lr_factor("wsd", 10, 0, 0.5, 0.1, 1.0) == lr_factor("cosine", 10, 0, 0.5, 0.1)
    assert lr_factor("cosine", 1, 4, 0.25, 0.0) == pytest.approx(
        0.5 * 0.5 * (1 + math.cos(math.pi / 4))
    )


class LrSeen(Callback):
    """The lr of each optimiser's first group after every training step."""

    def __init__(self) -> None:
        self.seen: list[list[float]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.seen.append([opt.param_groups[0]["lr"] for opt in trainer.optimizers])


def _logged_lrs(run) -> list[float]:
    """The `train/lr` column of a run's metrics.csv, one value per logged step."""
    import polars as pl_frame

    return pl_frame.read_csv(run / "metrics.csv").drop_nulls("train/lr")["train/lr"].to_list()


@pytest.mark.parametrize(
    ("extra", "sparse"),
    [(["train.lr_schedule=cosine", "train.warmup_steps=2", "train.min_lr_ratio=0.1"], True),
     ([], False)],
)  # fmt: skip
def test_a_fit_steps_every_optimiser_by_the_schedule(tmp_path, extra, sparse) -> None:
    splits = tiny_home(tmp_path)[1]
    cfg = load_config(
        overrides=[*TINY, *extra, "train.max_epochs=2", f"train.sparse_embeddings={sparse}"]
    )
    module = build_module(cfg, splits.num_items, item_counts(splits))
    seen = LrSeen()
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(
        max_epochs=2, limit_train_batches=4, limit_val_batches=0, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        accelerator="cpu", callbacks=[seen],
    )  # fmt: skip
    trainer.fit(module, datamodule=SequenceDataModule(splits, 10, 32))
    lr = cfg.train.lr
    assert len(seen.seen) == 8 and all(len(row) == (2 if sparse else 1) for row in seen.seen)
    if not extra:
        assert all(v == lr for row in seen.seen for v in row)  # constant: never touched
        return
    want = [lr * lr_factor("cosine", s, 2, s / 8, 0.1) for s in range(8)]  # progress s / 8
    for row, expected in zip(seen.seen, want, strict=True):
        assert row == pytest.approx([expected] * len(row))
    assert seen.seen[0][0] == pytest.approx(lr * 0.5) and seen.seen[-1][0] < 0.2 * lr
    assert torch.isfinite(module.model.item_embedding_weight).all()


def test_plateau_is_wsd_until_validation_stalls_then_decays_over_its_steps() -> None:
    assert lr_factor("plateau", 10, 0, 0.5, 0.1, 0.2) == 1.0  # no plateau yet: wsd
    assert lr_factor("plateau", 10, 0, 0.9, 0.1, 0.2) == lr_factor("wsd", 10, 0, 0.9, 0.1, 0.2)
    stalled = (100, 40)  # validation stopped improving at step 100; decay over 40 steps
    assert lr_factor("plateau", 100, 0, 0.5, 0.1, 0.2, stalled) == pytest.approx(1.0)
    assert lr_factor("plateau", 120, 0, 0.5, 0.1, 0.2, stalled) == pytest.approx(0.55)
    assert lr_factor("plateau", 140, 0, 0.5, 0.1, 0.2, stalled) == pytest.approx(0.1)
    assert lr_factor("plateau", 999, 0, 0.5, 0.1, 0.2, stalled) == pytest.approx(0.1)
    # the budget's decay, when further along, wins
    assert lr_factor("plateau", 101, 0, 0.9, 0.1, 0.2, stalled) == pytest.approx(0.55, abs=0.01)
    assert lr_factor("wsd", 120, 0, 0.5, 0.1, 0.2, stalled) == 1.0  # wsd ignores a plateau


def _stalled_fit(tmp_path, schedule: str, resumable: bool = False, refit_epochs: int = 0):
    """A real fit whose validation cannot improve (lr 1e-12): patience 2, 3 batches an epoch.

    `refit_epochs`: the refit that follows it (the fit does not run it).
    """
    from training.loop.trainer import fit

    splits = tiny_home(tmp_path, schedule)[1]
    cfg = load_config(
        overrides=[*TINY, "train.lr=1e-12", f"train.lr_schedule={schedule}", "train.patience=2",
                   "train.max_epochs=20"]
    )  # fmt: skip
    run = tmp_path / schedule / "runs" / "r"
    fitted = fit(
        cfg, splits, run, resumable=resumable, refit_epochs=refit_epochs,
        limit_train_batches=3, log_every_n_steps=1,
    )  # fmt: skip
    return fitted, _logged_lrs(run)


def test_last_ckpt_holds_the_latest_epoch_also_when_validation_did_not_improve(tmp_path) -> None:
    _stalled_fit(tmp_path, "wsd", resumable=True)  # best at epoch 0, stopped after epoch 2
    folder = tmp_path / "wsd" / "runs" / "r" / "checkpoints"
    assert torch.load(folder / "best.ckpt", weights_only=False)["epoch"] == 0
    assert torch.load(folder / "last.ckpt", weights_only=False)["epoch"] == 2


def test_plateau_decays_where_early_stopping_would_stop_and_ends_with_the_decay(tmp_path) -> None:
    plain, _ = _stalled_fit(tmp_path, "wsd")
    assert len(plain.epoch_seconds) == 3  # best at round 1, no gain in rounds 2 and 3: stop
    fitted, lrs = _stalled_fit(tmp_path, "plateau")
    # the same plateau after 3 rounds (9 steps) starts a cosine over patience 2 rounds (6 steps)
    assert len(fitted.epoch_seconds) == 5 and fitted.module.clock.plateau == (9, 6)
    want = [1e-12] * 9 + [
        1e-12 * lr_factor("plateau", s, 0, 0.0, 0.0, 0.2, (9, 6)) for s in range(9, 15)
    ]
    assert lrs == pytest.approx(want, rel=1e-6)
    assert lrs[-1] < 0.1e-12


def test_a_plateau_fit_a_refit_follows_stops_at_its_plateau_without_decaying(tmp_path) -> None:
    fitted, lrs = _stalled_fit(tmp_path, "plateau", refit_epochs=2)  # the refit takes the decay
    assert len(fitted.epoch_seconds) == 3 and fitted.module.clock.plateau is None
    assert lrs == pytest.approx([1e-12] * 9, rel=1e-6)  # three rounds of 3 steps, lr untouched


def test_a_resumed_fit_continues_the_schedule_where_the_killed_one_left_it(tmp_path) -> None:
    from training.loop.trainer import fit

    splits, run = tiny_home(tmp_path)[1], tmp_path / "home" / "runs" / "r"
    sets = [*TINY, "train.lr_schedule=cosine", "train.patience=5"]
    first = fit(load_config(overrides=[*sets, "train.max_epochs=2"]), splits, run,
                resumable=True, limit_train_batches=3)  # fmt: skip
    assert first.module.clock.steps == 6
    seconds = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["clock"]["seconds"]
    assert 0 < seconds <= first.module.clock.seconds()
    # the same run asked for 4 epochs (another config: its finished fit is not reused): it
    # resumes from last.ckpt after epoch 2
    cfg = load_config(overrides=[*sets, "train.max_epochs=4"])
    again = fit(cfg, splits, run, resumable=True, limit_train_batches=3, log_every_n_steps=1)
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["clock"]
    assert again.module.clock.steps == 12 and saved["steps"] == 12  # the last epoch's, kept
    assert again.module.clock.resumed_seconds == pytest.approx(seconds, abs=1.0)
    lrs = _logged_lrs(run)[-6:]  # the resumed part's steps 6..11 of a 12-step cosine
    want = [cfg.train.lr * lr_factor("cosine", s, 0, s / 12, 0.0) for s in range(6, 12)]
    assert lrs == pytest.approx(want, rel=1e-5)


class _StubTrainer:
    """What `DecayBeforeStopping` reads of a trainer: the module's clock and the epoch."""

    def __init__(self) -> None:
        from training.loop.clock import TrainingClock

        self.lightning_module = SimpleNamespace(clock=TrainingClock())
        self.current_epoch = -1


def _rounds(callback, trainer, scores: list[float], steps_per_epoch: int) -> list[bool]:
    """Feed one validation score per round; the stop decision after each."""
    decisions = []
    for score in scores:  # one validation round each, after `rounds_every` epochs
        trainer.current_epoch += callback.rounds_every
        trainer.lightning_module.clock.steps += steps_per_epoch * callback.rounds_every
        callback._trainer = trainer
        decisions.append(callback._evaluate_stopping_criteria(torch.tensor(score))[0])
    return decisions


@pytest.mark.parametrize("val_every", [1, 2])
def test_the_run_stops_when_the_plateau_decay_ends_even_while_it_improves(val_every) -> None:
    from training.loop.plateau import DecayBeforeStopping

    callback = DecayBeforeStopping(val_every, monitor="val/ndcg@10", mode="max", patience=2)
    trainer, per_round = _StubTrainer(), 4 * val_every  # 4 steps an epoch
    clock = trainer.lightning_module.clock
    # rounds 2 and 3 do not improve: the plateau starts the decay over 2 rounds' steps
    assert _rounds(callback, trainer, [0.5, 0.4, 0.4], 4) == [False] * 3
    assert clock.plateau == (3 * per_round, 2 * per_round) and callback.wait_count == 0
    # the decay improves validation every round, and the run still ends with the decay
    assert _rounds(callback, trainer, [0.6, 0.7], 4) == [False, True]


def test_with_rounds_every_n_steps_the_plateau_decays_over_n_steps_a_round() -> None:
    from training.loop.plateau import DecayBeforeStopping

    callback = DecayBeforeStopping(1, 7, monitor="val/ndcg@10", mode="max", patience=2)
    trainer = _StubTrainer()
    clock = trainer.lightning_module.clock
    # rounds every 7 steps inside one long epoch (the epoch counter does not move)
    for score in (0.5, 0.4, 0.4):
        clock.steps += 7
        callback._trainer = trainer
        assert not callback._evaluate_stopping_criteria(torch.tensor(score))[0]
    assert clock.plateau == (21, 14)  # decays over 2 rounds of 7 steps from step 21


def test_a_finished_fit_run_again_trains_nothing_more(tmp_path) -> None:
    """A retrain killed after its fit, before its bundle was written, runs again: no more epochs."""
    first, _ = _stalled_fit(tmp_path, "wsd", resumable=True)  # best at epoch 0, stops after 2
    folder = tmp_path / "wsd" / "runs" / "r" / "checkpoints"
    before = torch.load(folder / "last.ckpt", weights_only=False)
    again, _ = _stalled_fit(tmp_path, "wsd", resumable=True)
    after = torch.load(folder / "last.ckpt", weights_only=False)
    assert after["epoch"] == before["epoch"] == 2
    assert after["global_step"] == before["global_step"]
    assert again.epoch_seconds == pytest.approx(first.epoch_seconds)  # the first fit's, kept
    for name, weight in first.module.state_dict().items():  # the best checkpoint, restored
        assert torch.equal(weight, again.module.state_dict()[name]), name


def test_a_fit_without_a_validation_round_leaves_no_finished_record(tmp_path) -> None:
    """`retrain --max-epochs 0` saves no best checkpoint: run again, it warm-starts again."""
    from training.loop.trainer import fit

    splits, run = tiny_home(tmp_path)[1], tmp_path / "home" / "runs" / "r"
    fit(load_config(overrides=TINY), splits, run, resumable=True, max_epochs=0)
    assert not (run / "checkpoints" / "fit.json").exists()


class _KillAfter(Callback):
    """Raises after `steps` training steps: a run killed in the middle of its first epoch."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def on_train_batch_end(self, trainer, *args) -> None:  # noqa: D102
        if trainer.lightning_module.clock.steps >= self.steps:
            raise RuntimeError("killed")


def test_rounds_every_n_steps_keep_a_last_checkpoint_inside_the_epoch(tmp_path) -> None:
    """A resumable fit whose epoch outlasts it still leaves a checkpoint to resume from."""
    from training.loop.trainer import fit

    splits, run = tiny_home(tmp_path)[1], tmp_path / "home" / "runs" / "r"
    cfg = load_config(overrides=[*TINY, "train.val_every_steps=1", "train.max_epochs=2"])
    kill = SimpleNamespace(apply=lambda module: [_KillAfter(2)])  # a warm start's callbacks
    with pytest.raises(RuntimeError, match="killed"):
        fit(cfg, splits, run, start=kill, resumable=True)
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert state["epoch"] == 0 and state["global_step"] >= 1  # a round inside epoch 0


@pytest.mark.parametrize("decoupled", [False, True])
def test_decoupled_weight_decay_shrinks_a_weight_without_gradient_by_lr_times_decay(
    decoupled: bool,
) -> None:
    train = load_config(overrides=["train.lr=0.01", "train.weight_decay=0.5"]).train
    train.decoupled_weight_decay = decoupled
    model = build_model({"tower": "sasrec", "dim": 8, "max_len": 4, "num_layers": 1}, 20)
    weight = model.query_tower.pos_embedding.weight
    before = weight.detach().clone()
    (optimizer,) = make_optimizers(model, [], train)
    for param in model.parameters():
        param.grad = torch.zeros_like(param)
    optimizer.step()
    if decoupled:  # AdamW: w <- w (1 - lr wd), whatever the gradient's scale
        assert torch.allclose(weight, before * (1 - 0.01 * 0.5))
    else:  # L2 in Adam: the gradient wd w is rescaled to about lr times its sign
        assert torch.allclose(weight, before - 0.01 * before.sign(), atol=1e-4)
