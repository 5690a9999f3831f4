"""Fixtures of the benchmark tests: an unwritable path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A file where a folder is expected: no output under it can be written."""
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path
