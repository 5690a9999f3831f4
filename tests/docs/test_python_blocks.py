"""The Python blocks of README.md and docs/getting-started/ marked runnable run without an error.

A block is marked as a shell block is: a `<!-- runnable -->` line directly above its ```python
fence. A page's blocks run in order in this process, in one temp folder holding the
repository's examples/, with no RECSYS_* setting in the environment.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.docs.test_runnable_blocks import ROOT, runnable_blocks

PYTHON = re.compile(r"^```python\s*$")


def pages_with_python_blocks() -> list[Path]:
    """README.md and the getting-started pages that have a runnable Python block."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "getting-started").glob("*.md"))]
    return [p for p in pages if runnable_blocks(p.read_text(encoding="utf-8"), PYTHON)]


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("page", pages_with_python_blocks(), ids=lambda p: p.name)
def test_runnable_python_blocks_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for name in [key for key in os.environ if key.startswith("RECSYS_")]:
        monkeypatch.delenv(name)
    for block in runnable_blocks(page.read_text(encoding="utf-8"), PYTHON):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        exec(compile(block.code, where, "exec"), {"__name__": "__main__"})


def test_the_readme_shows_the_python_api() -> None:
    (block,) = runnable_blocks((ROOT / "README.md").read_text(encoding="utf-8"), PYTHON)
    assert "import recsys\n" in block.code and "recsys.train(" in block.code
