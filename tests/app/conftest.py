"""Fixtures of the CLI tests: the real `recsys` entry point run in-process."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The real CLI entry point in-process (no interpreter start)."""
    from app.cli import main

    def run(*args: str, home: Path, **env: str) -> Done:
        monkeypatch.setattr(sys, "argv", ["recsys", *args, "--home", str(home)])
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        with pytest.raises(SystemExit) as exit_info:
            main()
        out = capsys.readouterr()
        return Done(int(exit_info.value.code or 0), out.out, out.err)

    return run


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A file where a folder is expected: no output under it can be written."""
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path
