"""`recsys bench`: the checkout's benchmarks behind the product's CLI, imported when called."""

from __future__ import annotations

import sys

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
