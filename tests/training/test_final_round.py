"""A fit that ends off its validation cadence still validates its last step (`FinalRound`)."""

from pathlib import Path

import pytest

from tests.training.tiny import TINY, tiny_home, validation_rounds
from training.config_loading import load_config
from training.loop.trainer import fit


def _validated_steps(tmp_path: Path, sets: list[str]) -> tuple[list[int], int]:
    """The steps at which a tiny fit logged a validation round, and the fit's last step."""
    ws, splits = tiny_home(tmp_path)
    run = ws.root / "runs" / "r"
    fitted = fit(load_config(overrides=[*TINY, "train.patience=50", *sets]), splits, run)
    rounds = [int(row["step"]) for row in validation_rounds(run)]
    return rounds, fitted.module.clock.steps


@pytest.mark.parametrize(
    "sets",
    [
        ["train.val_every=2", "train.max_epochs=3"],  # epoch 3 is off the cadence
        ["train.val_every=5", "train.max_epochs=3"],  # no round on the cadence at all
        ["train.val_every_steps=5", "train.max_epochs=3"],  # 3 epochs of 4 steps: not a 5th
    ],
)
def test_the_last_step_is_validated_off_the_cadence(tmp_path: Path, sets: list[str]) -> None:
    rounds, steps = _validated_steps(tmp_path, sets)
    assert steps == 12  # 3 x 4 or 2 x 4 steps would be off every cadence above
    assert rounds and rounds[-1] == steps - 1  # Lightning logs a round at its batch's index
    assert len(rounds) == len(set(rounds))  # never twice for one step


def test_the_time_cap_validates_where_it_stops(tmp_path: Path) -> None:
    # rounds every 3 epochs, a cap that stops the fit inside its first epoch
    rounds, steps = _validated_steps(
        tmp_path, ["train.val_every=3", "train.max_epochs=6", "train.max_minutes=0.0001"]
    )
    assert steps >= 1 and rounds == [steps - 1]
    best = tmp_path / "home" / "runs" / "r" / "checkpoints" / "best.ckpt"
    assert best.is_file()  # the one round, the last step's, chose the checkpoint


def test_rounds_on_the_cadence_are_not_repeated(tmp_path: Path) -> None:
    rounds, steps = _validated_steps(tmp_path, ["train.val_every=1", "train.max_epochs=2"])
    assert len(rounds) == 2 and rounds[-1] == steps - 1
