"""Ctrl-C in a fit leaves `training.loop.trainer.fit` as a KeyboardInterrupt, not exit 1."""

import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pytorch_lightning.callbacks import Callback

from tests.training.tiny import TINY, tiny_home
from training.config_loading import load_config
from training.loop.interrupt import interruptible_fit
from training.loop.trainer import fit


class _CtrlC(Callback):
    """Ctrl-C at the fit's first training step."""

    def on_train_batch_start(self, *args: Any) -> None:
        raise KeyboardInterrupt


class _Start:
    """A `fit` start hook that only adds `_CtrlC`."""

    def apply(self, module: Any) -> list[Callback]:
        return [_CtrlC()]


def test_an_interrupted_fit_raises_keyboard_interrupt_with_ctrl_c_working_again(
    tmp_path: Path,
) -> None:
    ws, splits = tiny_home(tmp_path)
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1"])
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        fit(cfg, splits, ws.root / "runs" / "r", start=_Start())
    assert signal.getsignal(signal.SIGINT) is before  # Lightning had set it to ignore Ctrl-C


def test_an_exit_that_is_not_an_interrupt_leaves_as_it_was() -> None:
    def exits(*args: Any, **kwargs: Any) -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit) as stop:
        interruptible_fit(SimpleNamespace(fit=exits))  # type: ignore[arg-type]
    assert stop.value.code == 3
