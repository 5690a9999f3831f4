"""Every `python -m benchmarks` command's `--help` says what each option takes as `recsys` does."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchmarks.cli import COMMANDS, bench_app
from tests.app.test_cli_help import LEAKS


@pytest.mark.parametrize(
    "command", [[], *([name] for name in COMMANDS)], ids=lambda command: " ".join(command) or "root"
)
def test_benchmark_help_shows_no_python_types_and_defaults_one_way(command: list[str]) -> None:
    result = CliRunner().invoke(bench_app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for leak in LEAKS:
        assert leak not in result.stdout, (command, leak)


def test_a_bounded_number_shows_its_type_and_its_bounds() -> None:
    result = CliRunner().invoke(bench_app, ["train-step", "--help"], env={"COLUMNS": "200"})
    row = next(line for line in result.stdout.splitlines() if "--batch " in line)
    assert row.split()[2:4] == ["<int>", "[x>=1]"], row
