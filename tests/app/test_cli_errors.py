"""`app.cli.main`: exit codes and one stderr line for whatever a command raises."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import app, main
from data.synth import generate_events

REPO = Path(__file__).resolve().parents[2]


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real entry point in-process: (exit code, stdout, stderr)."""
    saved = sys.argv
    sys.argv = ["recsys", *args]
    try:
        with pytest.raises(SystemExit) as stop:
            main()
    finally:
        sys.argv = saved
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out, out.err


@pytest.fixture
def raising() -> Iterator[None]:
    """A `raise KIND` command on the real app (what a library may raise inside any command)."""
    kinds = {"eof": EOFError("No data left in file"), "interrupt": KeyboardInterrupt()}

    def raise_(kind: str) -> None:
        """Raise the named exception."""
        raise kinds[kind]

    app.command("raise")(raise_)
    yield
    app.registered_commands.pop()


@pytest.mark.usefixtures("raising")
def test_a_raw_eof_error_is_one_line_naming_it_not_aborted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _main(capsys, "raise", "eof")
    assert (code, out) == (1, "")
    assert err == "error: EOFError: No data left in file (-v for details)\n"


@pytest.mark.usefixtures("raising")
def test_an_interrupt_is_exit_130_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(capsys, "raise", "interrupt") == (130, "", "interrupted\n")


def test_help_usage_errors_and_a_bare_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "--help")
    assert code == 0 and "train" in out and err == ""
    code, out, err = _main(capsys, "trian")
    assert code == 2 and out == "" and "No such command 'trian'" in err
    code, out, err = _main(capsys)  # no arguments: the help, on stdout only
    assert code == 2 and "train" in out and err == ""


def test_ctrl_c_while_training_is_exit_130_not_lightnings_silent_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from training.loop.progress import EpochTimer

    def ctrl_c(*args: object) -> None:
        raise KeyboardInterrupt  # inside the fit: Lightning catches it and calls sys.exit(1)

    monkeypatch.setattr(EpochTimer, "on_train_epoch_start", ctrl_c)
    log = tmp_path / "log.csv"
    generate_events(60, 40, 900, seed=3).write_csv(log)
    tiny = ["--set=model.dim=16", "--set=model.max_len=10", "--set=model.num_layers=1"]
    args = ["train", "--dataset", str(log), "--home", str(tmp_path / "home"), "--max-epochs", "1"]
    code, out, err = _main(capsys, *args, *tiny)
    assert (code, out) == (130, "") and err.endswith("interrupted\n")


@pytest.mark.parametrize(("refit", "said"), [("8", "1 epoch + 8 refit, "), ("0", "1 epoch, ")])
def test_the_result_line_of_a_one_epoch_training_says_1_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], refit: str, said: str
) -> None:
    log = tmp_path / "log.csv"
    generate_events(60, 40, 900, seed=3).write_csv(log)
    tiny = ["--set=model.dim=16", "--set=model.max_len=10", "--set=model.num_layers=1"]
    args = ["train", "--dataset", str(log), "--home", str(tmp_path / "home"), "--max-epochs", "1"]
    code, out, _ = _main(capsys, *args, *tiny, f"--set=train.refit_epochs={refit}")
    assert code == 0 and f"sampler full, {said}" in out  # not "1 epochs"; auto's full softmax


@pytest.mark.parametrize(
    "args", [["tune", "--help"], ["--help"], ["models", "list", "--home", "{tmp}/home"]]
)
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly_with_141(
    tmp_path: Path, args: list[str]
) -> None:
    # 141 = 128 + SIGPIPE, the status `set -o pipefail` scripts get from `cat big | head -1`;
    # the help is rich's writing, an empty home's `models list` a plain one
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app", *[a.format(tmp=tmp_path) for a in args]],
            cwd=REPO, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")  # no "error: BrokenPipeError", no trace


TUNE = ["tune", "--budget-minutes", "1", "--home", "{tmp}/home"]
PIPELINE = ["bench", "data-pipeline", "--events", "10", "--out", "{tmp}/out.json"]


@pytest.mark.parametrize(
    ("args", "made", "seed"),
    [
        (TUNE, "home", "-1"),
        (TUNE, "home", str(2**32)),  # numpy's legacy seeding (train.seed) stops below 2**32
        (PIPELINE, "out.json", "-1"),  # its generator takes any seed >= 0, as recsys synth's
    ],
)
def test_a_seed_outside_numpys_range_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], made: str, seed: str
) -> None:
    code, _, err = _main(capsys, *[a.format(tmp=tmp_path) for a in args], "--seed", seed)
    assert code == 2 and "Invalid value for '--seed'" in err
    assert not (tmp_path / made).exists()  # no lock, no study, no result


def test_only_stdouts_own_reader_gone_is_a_quiet_141(monkeypatch: pytest.MonkeyPatch) -> None:
    # a BrokenPipeError from another pipe or socket of the command is a failure (exit 1)
    from app import cli

    read, write = os.pipe()
    with os.fdopen(write, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        assert not cli._stdout_gone()  # its reader is there: the error came from elsewhere
        os.close(read)
        assert cli._stdout_gone()


@pytest.mark.parametrize("accelerator", ["mps", "cuda"])
def test_an_accelerator_this_machine_lacks_is_bad_input_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], accelerator: str
) -> None:
    from lightning_fabric.accelerators import CUDAAccelerator, MPSAccelerator

    present = {"cuda": CUDAAccelerator, "mps": MPSAccelerator}[accelerator].is_available()
    if present:
        pytest.skip("this machine has the device")
    home = tmp_path / "home"
    args = ["train", "--home", str(home), "--dataset", "synthetic"]
    code, _, err = _main(capsys, *args, "--set", f"train.accelerator={accelerator}")
    assert code == 2 and f"train.accelerator={accelerator}, but torch sees no such" in err
    assert not home.exists()


@pytest.mark.parametrize("command", [["train"], ["tune", "--budget-minutes", "1"]])
@pytest.mark.parametrize("dataset", [None, "no-such-log.csv"])
def test_a_refused_training_leaves_no_home_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dataset: str | None, command: list[str]
) -> None:
    home = tmp_path / "home"
    given = [] if dataset is None else ["--dataset", str(tmp_path / dataset)]
    code, _, err = _main(capsys, *command, "--home", str(home), *given)
    assert code == 2 and ("has no events" in err if dataset is None else "no such file" in err)
    assert not home.exists()
