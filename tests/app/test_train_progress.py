"""A training run that is not on a terminal still shows one progress line per epoch."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import torch

from data.synth import generate_events
from tests.training.tiny import DEFAULT_REFIT, EVERY_POSITION, flags
from training.precision import resolve_precision

REPO = Path(__file__).resolve().parents[2]
# a target at every position: a few steps an epoch
TINY = flags(["model.dim=16", "model.max_len=10", "model.num_layers=1", *EVERY_POSITION])


def test_one_progress_line_per_epoch_on_stderr_without_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    generate_events(150, 80, 2000, seed=3).write_csv(log)
    env = {**os.environ, "RECSYS_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "app", "train", "--dataset", str(log), "--max-epochs", "3"]
    done = subprocess.run(
        [*cmd, *TINY, "--set", "train.patience=10"], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [ln for ln in done.stderr.splitlines() if re.search(r"epoch \d+/3, ", ln)]
    assert [re.search(r"epoch (\d+)/3", ln).group(1) for ln in lines] == ["1", "2", "3"]  # type: ignore[union-attr]
    pattern = r"train loss \d+\.\d{3}, val ndcg@10 0\.\d{4} recall@10 0\.\d{4}, \d+\.\d s, "
    assert all(re.search(pattern + r"at most \d+\.\d min to go", ln) for ln in lines), lines
    assert "Epoch 0" not in done.stderr  # no progress bar when stderr is not a terminal
    after = done.stderr[done.stderr.index(lines[-1]) :]  # the work after the last epoch says so
    assert re.search(r"ranking every item for the \d+ val rows", after)
    assert re.search(r"ranking every item for the \d+ test rows", after)
    assert "writing model bundle" in after


def test_validation_every_n_steps_adds_a_line_per_round(tmp_path: Path) -> None:
    # an epoch that outlasts the budget still validates: rounds every 3 steps, across epochs
    log = tmp_path / "log.csv"
    generate_events(150, 80, 2000, seed=3).write_csv(log)
    env = {**os.environ, "RECSYS_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "app", "train", "--dataset", str(log), "--max-epochs", "2"]
    sets = ["--set", "train.val_every_steps=3", "--set", "train.batch_size=32", "--json"]
    done = subprocess.run(
        [*cmd, *TINY, *sets], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [int(m.group(1)) for m in re.finditer(r"step (\d+), train loss", done.stderr)]
    on_cadence, last = steps[:-1], steps[-1]  # the fit's last step is validated too
    assert len(on_cadence) >= 3 and on_cadence == list(range(3, 3 * len(steps) - 2, 3)), steps
    assert on_cadence[-1] < last <= on_cadence[-1] + 3
    pattern = r"step \d+, train loss \d+\.\d{3}, val ndcg@10 0\.\d{4} recall@10 0\.\d{4}, "
    assert re.search(pattern + r"\d+\.\d s, at most \d+\.\d min to go", done.stderr)
    assert len(re.findall(r"epoch \d/2, ", done.stderr)) == 2  # the epoch lines stay
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    with (run_dir / "metrics.csv").open() as rows:
        rounds = [row for row in csv.DictReader(rows) if row["val/ndcg@10"]]
    assert len(rounds) == len(steps)  # one logged round per line


@pytest.mark.slow  # over 10 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_thread_setting_is_honoured(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    generate_events(100, 50, 1200, seed=4).write_csv(log)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    cmd = [sys.executable, "-m", "app", "train", "--dataset", str(log), "--max-epochs", "1"]
    cmd += [*TINY, "--set", "train.accelerator=cpu", "--json", "--home", str(tmp_path / "home")]
    threads = {}
    for setting in ("1", "null"):
        done = subprocess.run(
            [*cmd, "--set", f"train.threads={setting}", "--version", f"t{setting}"], cwd=REPO,
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        threads[setting] = json.loads(done.stdout)["threads"]
        used = resolve_precision("auto", torch.device("cpu"))  # the default's choice here
        assert json.loads(done.stdout)["precision"] == used
        assert f"matmuls in {used} (precision auto)" in done.stderr
    fresh = subprocess.run(  # torch's default in a new process with this environment
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert threads == {"1": 1, "null": int(fresh.stdout)}


def test_on_a_terminal_the_bar_counts_epochs_from_1_on_stderr_and_stdout_is_the_result(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.csv"
    generate_events(100, 50, 1200, seed=5).write_csv(log)
    env = {**os.environ, "RECSYS_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "app", "train", "--dataset", str(log), "--max-epochs", "2"]
    leader, follower = pty.openpty()  # stderr is a terminal, stdout a pipe
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    proc = subprocess.Popen(
        [*cmd, *TINY], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=follower, text=True
    )
    os.close(follower)
    terminal = b""
    with contextlib.suppress(OSError):  # EIO once the child closed the terminal
        while chunk := os.read(leader, 65536):
            terminal += chunk
    stdout = proc.communicate(timeout=300)[0]
    os.close(leader)
    assert proc.returncode == 0, terminal.decode(errors="replace")[-2000:]
    shown = terminal.decode(errors="replace")
    assert "Epoch 1/2" in shown and "Epoch 2/2" in shown and "Epoch 0" not in shown
    last = f"Refit {DEFAULT_REFIT}/{DEFAULT_REFIT}"  # the refit's own bar, the default's epochs
    assert f"Refit 1/{DEFAULT_REFIT}" in shown and last in shown and "Refit 0" not in shown
    assert "Tip" not in shown and "LeafSpec" not in shown and "GPU available" not in shown
    assert stdout.count("\n") == 1 and stdout.startswith("model ") and "published" in stdout
