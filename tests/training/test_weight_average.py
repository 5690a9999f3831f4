"""The moving average of the weights (`train.ema_decay`, `training/weight_average.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch

from data.errors import RecsysInputError
from model.bundle import ModelBundle
from tests.training.tiny import TINY, tiny_home, validation_rounds
from training.config_loading import load_config
from training.loop import memory
from training.loop.module_build import build_module
from training.loop.trainer import fit
from training.loop.weight_average import LIVE_KEY, WeightAverage
from training.workflows.pipeline import train_on
from training.workflows.scoring import measure


class _Shared(pl.LightningModule):
    """Two names for one table, as the towers share the item table."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(3, 2))
        self.other = torch.nn.Linear(2, 1)
        self.alias = torch.nn.Module()
        self.alias.weight = self.table


def _step(average: WeightAverage, module: pl.LightningModule, value: float) -> None:
    """Set parameter i to value + 10 i, then one step of the average."""
    with torch.no_grad():
        for i, param in enumerate(module.parameters()):
            param.fill_(value + 10 * i)
    average.on_train_batch_end(None, module, None, None, 0)  # type: ignore[arg-type]


def _started(decay: float) -> tuple[WeightAverage, _Shared]:
    average, module = WeightAverage(decay), _Shared()
    with torch.no_grad():
        for i, param in enumerate(module.parameters()):
            param.fill_(10 * i)  # the start: parameter i at 10 i
    average.on_train_start(None, module)  # type: ignore[arg-type]
    return average, module


def test_each_parameter_averages_its_own_values_with_the_warm_up_then_the_decay() -> None:
    average, module = _started(0.9)
    assert [average.decay_at(t) for t in (1, 8, 80, 10**6)] == [2 / 11, 0.5, 0.9, 0.9]
    expected = 0.0  # parameter i's average is this + 10 i
    for t, value in enumerate([1.0, 2.0, 4.0, 8.0], start=1):
        _step(average, module, value)
        expected += (1 - average.decay_at(t)) * (value - expected)
    assert average.shadow is not None and 0.0 < expected < 8.0  # an average, not the live weights
    for i, (name, param) in enumerate(module.named_parameters()):
        assert torch.allclose(average.shadow[name], torch.full_like(param, expected + 10 * i))
    average.on_train_end(None, module)  # type: ignore[arg-type]
    assert torch.allclose(module.table.detach(), torch.full((3, 2), expected))  # the fit's model


def test_a_checkpoint_holds_the_average_under_every_name_and_resumes_both() -> None:
    average, module = _started(0.5)
    _step(average, module, 4.0)
    _step(average, module, 6.0)
    shadow = average.shadow["table"].clone()  # type: ignore[index]
    live = {name: t.clone() for name, t in module.state_dict().items()}
    checkpoint: dict[str, Any] = {"state_dict": live}
    average.on_save_checkpoint(None, module, checkpoint)  # type: ignore[arg-type]
    saved = checkpoint["state_dict"]
    assert torch.equal(saved["table"], shadow) and torch.equal(saved["alias.weight"], shadow)
    assert torch.equal(checkpoint[LIVE_KEY]["table"], torch.full((3, 2), 6.0))
    assert torch.equal(module.table.detach(), torch.full((3, 2), 6.0))  # training's weights stay

    resumed, fresh = WeightAverage(0.5), _Shared()
    fresh.load_state_dict(saved)  # Lightning loads the state_dict before the callbacks' hook
    resumed.on_load_checkpoint(None, fresh, checkpoint)  # type: ignore[arg-type]
    resumed.load_state_dict(average.state_dict())
    assert torch.equal(fresh.table.detach(), torch.full((3, 2), 6.0))
    assert torch.equal(resumed.shadow["table"], shadow)  # type: ignore[index]
    assert resumed.steps == 2


def test_the_rounds_rank_the_average_and_the_fit_restores_it(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    cfg = load_config(overrides=[*TINY, "train.ema_decay=0.9", "train.max_epochs=3"])
    run = ws.runs_dir / "ema"
    fitted = fit(cfg, splits, run, resumable=True)
    logged = max(float(r["val/ndcg@10"]) for r in validation_rounds(run))
    assert measure(fitted.module, fitted.data, cfg, "val")["ndcg@10"] == pytest.approx(logged)
    best = torch.load(run / "checkpoints" / "best.ckpt", weights_only=False)
    live, average = best[LIVE_KEY], best["state_dict"]
    for name, weight in fitted.module.state_dict().items():
        assert torch.equal(weight, average[name])
    table = "model.item_tower.embedding.weight"
    assert not torch.equal(average[table], live[table])  # the average is not the live weights


def test_a_resumed_fit_goes_on_from_the_saved_average_and_live_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, splits = tiny_home(tmp_path)
    sets = [*TINY, "train.ema_decay=0.9"]
    run = ws.runs_dir / "ema"
    fit(load_config(overrides=[*sets, "train.max_epochs=1"]), splits, run, resumable=True)
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    started: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int]] = []
    resume = WeightAverage.on_train_start

    def spy(self: WeightAverage, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        resume(self, trainer, module)
        assert self.shadow is not None
        live = {n: p.detach().clone() for n, p in module.named_parameters()}
        started.append(({n: t.clone() for n, t in self.shadow.items()}, live, self.steps))

    monkeypatch.setattr(WeightAverage, "on_train_start", spy)
    fit(load_config(overrides=[*sets, "train.max_epochs=2"]), splits, run, resumable=True)
    ((shadow, live, steps),) = started
    assert steps == saved["global_step"] > 0  # the warm-up goes on where it was
    for name in shadow:
        assert torch.equal(shadow[name], saved["state_dict"][name])
        assert torch.equal(live[name], saved[LIVE_KEY][name])


def _spy(
    monkeypatch: pytest.MonkeyPatch, hook: str
) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int]]:
    """Each call of the average's `hook`: its shadow, the module's weights and the step count.

    Seen after `on_train_start` (which makes the shadow), before any other hook.
    """
    calls: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int]] = []
    original = getattr(WeightAverage, hook)

    def spy(self: WeightAverage, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if hook == "on_train_start":
            original(self, trainer, module)
        assert self.shadow is not None
        weights = {n: p.detach().clone() for n, p in module.named_parameters()}
        calls.append(({n: t.clone() for n, t in self.shadow.items()}, weights, self.steps))
        if hook != "on_train_start":
            original(self, trainer, module)

    monkeypatch.setattr(WeightAverage, hook, spy)
    return calls


def test_the_refit_goes_on_averaging_from_the_best_round_and_ships_the_average(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, splits = tiny_home(tmp_path)
    sets = [*TINY, "train.ema_decay=0.9", "train.max_epochs=2", "train.refit_epochs=2"]
    starts, ends = _spy(monkeypatch, "on_train_start"), _spy(monkeypatch, "on_train_end")
    result = train_on(ws, load_config(overrides=sets), splits, "ema", "tiny")
    assert result is not None and result.refit_epochs == 2
    (_, (shadow, live, steps)), (_, (average, last_live, refit_steps)) = starts, ends
    best = torch.load(ws.runs_dir / "ema" / "checkpoints" / "best.ckpt", weights_only=False)
    assert steps == best["global_step"] > 0 and refit_steps > steps  # the warm-up goes on
    for name in shadow:  # the refit starts from the best round's average and live weights
        assert torch.equal(shadow[name], best["state_dict"][name])
        assert torch.equal(live[name], best[LIVE_KEY][name])
    refit = torch.load(ws.runs_dir / "ema" / "checkpoints" / "refit.ckpt", weights_only=False)
    table = "model.query_tower.item_embedding.weight"  # the item tower's too
    assert torch.equal(refit["state_dict"][table], average[table])  # it ships the average
    assert LIVE_KEY not in refit  # alone: the live weights ended with the refit
    assert not torch.equal(average[table], last_live[table])
    shipped = torch.as_tensor(ModelBundle.load(ws.models_dir / "ema").item_embeddings)
    assert torch.allclose(shipped[1:], average[table][1:].float(), atol=1e-6)


def test_the_decay_lies_strictly_between_0_and_1() -> None:
    with pytest.raises(ValueError, match="decay"):
        WeightAverage(1.0)
    with pytest.raises(RecsysInputError, match="ema_decay"):
        load_config(overrides=["train.ema_decay=1"])


def test_the_memory_budget_counts_the_average_as_one_more_copy_of_the_weights() -> None:
    cfg = load_config(overrides=[*TINY, "model.tower=sasrec", "train.ema_decay=0.99"])
    module = build_module(cfg, 40, torch.ones(41))
    # TINY's sasrec: 41 x 16 shared table, 10 x 16 positions, one block with d = 16, 2 norms
    block = 2 * 2 * 16 + (3 * 16 * 16 + 3 * 16) + (16 * 16 + 16) + 2 * (16 * 16 + 16)
    expected = (41 * 16 + 10 * 16 + block + 2 * 16) * 4 / memory.MIB
    assert memory.budget(module, module.cfg, world=1)["weight average"] == pytest.approx(expected)
    sets = [*TINY, "model.tower=sasrec", "train.ema_decay=null"]
    plain = build_module(load_config(overrides=sets), 40, torch.ones(41))
    assert "weight average" not in memory.budget(plain, plain.cfg, 1)
