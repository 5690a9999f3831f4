"""Every benchmark's `--help` says what each option takes as `recsys` does.

The commands of `python -m benchmarks`, and each study run as `python -m
benchmarks.studies.<name>` (`typer.run(main)`), share `recsys`'s help rendering.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import benchmarks.studies
from benchmarks.cli import COMMANDS, bench_app
from tests.app.test_cli_help import LEAKS

STUDIES = sorted(
    path.stem
    for path in Path(benchmarks.studies.__file__).parent.glob("*.py")
    if "typer.run(main)" in path.read_text()  # the others parse their few options with argparse
)


def _help(app: typer.Typer, *command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    "command", [[], *([name] for name in COMMANDS)], ids=lambda command: " ".join(command) or "root"
)
def test_benchmark_help_shows_no_python_types_and_defaults_one_way(command: list[str]) -> None:
    text = _help(bench_app, *command)
    for leak in LEAKS:
        assert leak not in text, (command, leak)


@pytest.mark.parametrize("name", STUDIES)
def test_study_help_shows_no_python_types_and_defaults_one_way(name: str) -> None:
    study = typer.Typer()
    study.command()(importlib.import_module(f"benchmarks.studies.{name}").main)
    text = _help(study)
    for leak in LEAKS:
        assert leak not in text, (name, leak)


def test_a_bounded_number_shows_its_type_and_its_bounds() -> None:
    row = next(line for line in _help(bench_app, "train-step").splitlines() if "--batch " in line)
    assert row.split()[2:4] == ["<int>", "[x>=1]"], row
