"""`recsys bench`: the checkout's benchmarks behind the product's CLI, imported when called."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.test_data_cli import run_inproc


def test_recsys_bench_hands_its_arguments_to_the_benchmarks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    done = run_inproc(capsys, "bench", "--help")
    assert done.returncode == 0 and "recsys bench" in done.stdout and "train-step" in done.stdout
    done = run_inproc(capsys, "bench", "events", "--stored", "0,-5")
    assert done.returncode == 2 and done.stderr == (
        "error: --stored: values must be at least 0, got '0,-5'\n"
    )


def test_without_the_benchmarks_package_it_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("benchmarks", "benchmarks.cli"):  # as a product installed alone
        monkeypatch.setitem(sys.modules, name, None)
    done = run_inproc(capsys, "bench", "--help")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not installed with recsys" in done.stderr and "python -m benchmarks" in done.stderr


def test_the_installed_command_finds_the_checkouts_benchmarks(tmp_path: Path) -> None:
    """The console script, run from elsewhere, as a user of `make install` runs it."""
    script = Path(sys.executable).parent / "recsys"
    if not script.is_file():
        pytest.skip(f"no installed recsys command beside {sys.executable}")
    done = subprocess.run(
        [str(script), "bench", "--help"], cwd=tmp_path, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train-step" in done.stdout
