"""Every `recsys` command, option and argument says what it is in `--help`."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from app.cli import app


def _commands(group, path=("recsys",)):  # type: ignore[no-untyped-def]
    """(command path, click command) for the root and every subcommand, depth first."""
    yield " ".join(path), group
    for name, sub in getattr(group, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_command_option_and_argument_has_a_description() -> None:
    missing = []
    for where, command in _commands(get_command(app)):
        if not (command.help or command.short_help):
            missing.append(where)
        for param in command.params:
            if param.name != "help" and not (getattr(param, "help", None) or "").strip():
                missing.append(f"{where} {param.name}")
    assert missing == []


def test_train_help_points_to_the_default_config_for_set_keys() -> None:
    result = CliRunner().invoke(app, ["train", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "configs/default.yaml" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    "command",
    [where.split(" ", 1)[1] for where, _ in _commands(get_command(app)) if " " in where],
)
def test_the_description_wraps_at_the_terminal_width_not_mid_sentence(command: str) -> None:
    width = 80
    result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0
    description = [line.strip() for line in result.stdout.split("╭")[0].splitlines()]
    for line, after in zip(description, description[1:], strict=False):
        if line and after:  # within a paragraph a line ends only where the next word cannot fit
            assert len(line) + 1 + len(after.split()[0]) > width - 2, (line, after)
