"""The moving average of the weights (`train.ema_decay`, `training/weight_average.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch

from data.errors import RecsysInputError
from tests.training.tiny import TINY, tiny_home, validation_rounds
from training.config_loading import load_config
from training.scoring import measure
from training.trainer import fit
from training.weight_average import LIVE_KEY, WeightAverage


class _Shared(pl.LightningModule):
    """Two names for one table, as the towers share the item table."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(3, 2))
        self.other = torch.nn.Linear(2, 1)
        self.alias = torch.nn.Module()
        self.alias.weight = self.table


def _step(average: WeightAverage, module: pl.LightningModule, value: float) -> None:
    with torch.no_grad():
        for param in module.parameters():
            param.fill_(value)
    average.on_train_batch_end(None, module, None, None, 0)  # type: ignore[arg-type]


def test_the_average_follows_the_warm_up_then_the_decay() -> None:
    average, module = WeightAverage(0.9), _Shared()
    assert [average.decay_at(t) for t in (1, 8, 80, 10**6)] == [2 / 11, 0.5, 0.9, 0.9]
    average.on_train_start(None, module)  # type: ignore[arg-type]
    expected = 0.0
    for t, value in enumerate([1.0, 2.0, 4.0, 8.0], start=1):
        _step(average, module, value)
        expected += (1 - average.decay_at(t)) * (value - expected)
    assert average.shadow is not None
    assert torch.allclose(average.shadow["table"], torch.full((3, 2), expected))
    assert 0.0 < expected < 8.0  # an average, not the live weights


def test_a_checkpoint_holds_the_average_under_every_name_and_resumes_both(tmp_path: Path) -> None:
    average, module = WeightAverage(0.5), _Shared()
    average.on_train_start(None, module)  # type: ignore[arg-type]
    _step(average, module, 4.0)  # the shadow moves from 0 by 1 - 2/11
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
    fresh.load_state_dict(saved)  # what Lightning loads before the callbacks' hook
    resumed.load_state_dict(average.state_dict())
    resumed.on_load_checkpoint(None, fresh, checkpoint)  # type: ignore[arg-type]
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


def test_the_decay_lies_strictly_between_0_and_1() -> None:
    with pytest.raises(ValueError, match="decay"):
        WeightAverage(1.0)
    with pytest.raises(RecsysInputError, match="ema_decay"):
        load_config(overrides=["train.ema_decay=1"])
    assert load_config().train.ema_decay is None  # off by default


def test_the_memory_budget_counts_the_average_as_one_more_copy_of_the_weights() -> None:
    from training import memory
    from training.trainer import build_module

    cfg = load_config(overrides=[*TINY, "train.ema_decay=0.99"])
    module = build_module(cfg, 40, torch.ones(41))
    parts = memory.budget(module, cfg, world=1)
    assert parts["weight average"] == pytest.approx(parts["optimiser state"] / 2)
    plain = load_config(overrides=TINY)
    assert "weight average" not in memory.budget(build_module(plain, 40, torch.ones(41)), plain, 1)
