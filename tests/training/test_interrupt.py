"""Ctrl-C in a fit leaves `training.loop.trainer.fit` as a KeyboardInterrupt, not exit 1."""

import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pytorch_lightning.callbacks import Callback

from tests.training.tiny import TINY, tiny_home
from training.config_loading import load_config
from training.loop.interrupt import TerminatedError, interruptible_fit
from training.loop.trainer import fit


class _CtrlC(Callback):
    """Ctrl-C at the fit's first training step."""

    def on_train_batch_start(self, *args: Any) -> None:
        raise KeyboardInterrupt


class _SigTerm(Callback):
    """SIGTERM to this process at the fit's first training step, as `docker stop` sends."""

    def on_train_batch_start(self, *args: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


class _Start:
    """A `fit` start hook that only adds the given callback."""

    def __init__(self, callback: Callback) -> None:
        self.callback = callback

    def apply(self, module: Any) -> list[Callback]:
        return [self.callback]


def test_an_interrupted_fit_raises_keyboard_interrupt_with_ctrl_c_working_again(
    tmp_path: Path,
) -> None:
    ws, splits = tiny_home(tmp_path)
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1"])
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        fit(cfg, splits, ws.root / "runs" / "r", start=_Start(_CtrlC()))
    assert signal.getsignal(signal.SIGINT) is before  # Lightning had set it to ignore Ctrl-C


def test_a_sigterm_fails_the_fit_instead_of_ending_it_as_a_success(tmp_path: Path) -> None:
    ws, splits = tiny_home(tmp_path)
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1"])
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(TerminatedError, match="nothing was published"):
            fit(cfg, splits, ws.root / "runs" / "r", start=_Start(_SigTerm()))
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_exit_that_is_not_an_interrupt_leaves_as_it_was() -> None:
    def exits(*args: Any, **kwargs: Any) -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit) as stop:
        interruptible_fit(SimpleNamespace(fit=exits))  # type: ignore[arg-type]
    assert stop.value.code == 3
