"""Every `recsys` command, option and argument says what it is in `--help`."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from app.cli import app

# What help must not show: a flag's value, Python types, a range's bounds in symbols, or a
# default anywhere but in `[default: ...]`.
LEAKS = ("<bool>", "list[", "<str>", "int range", "<=x<=", "Path]", "Default:", "(default")


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


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _option_row(text: str, option: str) -> str:
    """The help's row of `option` (its first line), without the panel's borders."""
    return next(
        line.strip("│ ") for line in text.splitlines() if line.strip("│ ").startswith(option + " ")
    )


def test_train_help_shows_flags_as_flags_and_lists_every_choice() -> None:
    text = _help("train")
    for flag in ("--json", "--reuse-published", "--help"):  # no `<bool>` after a flag
        assert not _option_row(text, flag).split()[1].startswith("<"), _option_row(text, flag)
    sampler = _option_row(text, "--sampler").split()[1]
    assert sampler.startswith("<") and {"uniform", "tapas", "full"} <= set(sampler[1:-1].split("|"))
    assert _option_row(text, "--format").split()[1] == "<csv|parquet|ndjson>"
    assert _option_row(text, "--strategy").split()[1] == "<auto|ddp>"
    assert _option_row(text, "--max-minutes").split()[1] == "<float>"


@pytest.mark.parametrize(
    "command",
    [where.split(" ")[1:] for where, _ in _commands(get_command(app)) if where != "recsys bench"],
)
def test_no_python_types_and_defaults_one_way(command: list[str]) -> None:
    text = _help(*command)
    for leak in LEAKS:
        assert leak not in text, (command, leak)


def test_choice_options_hold_the_products_values() -> None:
    from typing import get_args

    from app.api.settings import Settings
    from app.commands.data_cmds import LogFormat
    from app.commands.serve_cmds import IndexKind
    from app.commands.train_options import Strategy
    from data.formats import FORMATS
    from serving.index import INDEX_KINDS
    from training.config import TrainConfig

    assert get_args(LogFormat) == FORMATS
    assert get_args(IndexKind) == INDEX_KINDS == get_args(Settings.model_fields["index"].annotation)
    assert get_args(Strategy) == get_args(TrainConfig.model_fields["strategy"].annotation)
    serve = " ".join(_help("serve").split())
    defaults = Settings.model_construct()
    for env, value in [("HOST", defaults.host), ("PORT", defaults.port), ("INDEX", defaults.index)]:
        assert f"$RECSYS_{env}, else {value})" in serve
    assert f"$RECSYS_RELOAD_INTERVAL, else {defaults.reload_interval:g})" in serve


def test_version_is_the_projects_one_and_the_release_files_say_it() -> None:
    import tomllib
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"recsys {declared}\n"
    citation = yaml.safe_load((root / "CITATION.cff").read_text())
    assert citation["version"] == declared
    changelog = (root / "CHANGELOG.md").read_text().splitlines()
    releases = [line for line in changelog if line.startswith("## [")]
    releases = [line for line in releases if line != "## [Unreleased]"]  # changes to come
    assert releases[0] == f"## [{declared}] - {citation['date-released']}"
