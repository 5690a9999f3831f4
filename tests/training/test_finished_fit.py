"""`training.loop.finished_fit`: the record of a finished resumable fit, and when it is not used; a
fit started afresh over a killed one's folder."""

from __future__ import annotations

from pathlib import Path

from tests.training.tiny import TINY, tiny_home
from training.config_loading import load_config
from training.loop import finished_fit
from training.loop.trainer import fit


def test_the_record_serves_the_same_config_only_and_only_while_its_checkpoint_exists(
    tmp_path: Path,
) -> None:
    cfg = load_config(overrides=["model.dim=16"])
    best = tmp_path / "best-v1.ckpt"
    best.write_bytes(b"weights")
    finished_fit.write(tmp_path, cfg, finished_fit.FinishedFit(best, 12.5, [6.0, 6.5], 3))
    done = finished_fit.read(tmp_path, cfg)
    assert done == finished_fit.FinishedFit(best, 12.5, [6.0, 6.5], 3)  # refit: 3 epochs left
    assert finished_fit.read(tmp_path, load_config(overrides=["model.dim=32"])) is None
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in (finished_fit.FILE, best.name):  # the home moved: found by file name
        (tmp_path / name).rename(moved / name)
    assert finished_fit.read(moved, cfg) == finished_fit.FinishedFit(moved / best.name, 12.5,
                                                                      [6.0, 6.5], 3)  # fmt: skip
    (moved / best.name).unlink()
    assert finished_fit.read(moved, cfg) is None
    assert finished_fit.read(tmp_path, cfg) is None  # no record


def test_a_fit_started_afresh_over_a_killed_one_replaces_its_best_checkpoint(
    tmp_path: Path,
) -> None:
    ws, splits = tiny_home(tmp_path)
    run = ws.root / "runs" / "r"
    checkpoints = run / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "best.ckpt").write_bytes(b"the killed attempt's epoch 0")
    fit(load_config(overrides=[*TINY, "train.max_epochs=1"]), splits, run)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best.ckpt"]  # no best-v1.ckpt
    assert (checkpoints / "best.ckpt").read_bytes() != b"the killed attempt's epoch 0"


def test_a_resumed_fit_counts_the_epochs_and_seconds_of_the_run_it_resumed(
    tmp_path: Path,
) -> None:
    ws, splits = tiny_home(tmp_path)
    run = ws.root / "runs" / "r"
    sets = [*TINY, "train.patience=50"]
    first = fit(load_config(overrides=[*sets, "train.max_epochs=2"]), splits, run,
                resumable=True, limit_train_batches=3)  # fmt: skip
    assert len(first.epoch_seconds) == 2
    # the same run asked for 4 epochs (another config): it resumes last.ckpt after epoch 2
    cfg = load_config(overrides=[*sets, "train.max_epochs=4"])
    again = fit(cfg, splits, run, resumable=True, limit_train_batches=3)
    assert again.module.clock.steps == 12  # resumed, not trained afresh
    assert len(again.epoch_seconds) == 4 and again.epoch_seconds[:2] == first.epoch_seconds
    assert again.seconds > first.seconds
    done = finished_fit.read(run / "checkpoints", again.module.cfg)  # as trained: auto picked
    assert done is not None and done.epoch_seconds == again.epoch_seconds
    assert done.seconds == again.seconds
