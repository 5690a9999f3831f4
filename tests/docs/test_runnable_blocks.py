"""The shell blocks of README.md and docs/getting-started/ marked runnable run and exit 0.

A block is marked by a `<!-- runnable -->` line directly above its opening ```bash fence.
A page's blocks run in order, each in `bash` with `set -euo pipefail`, sharing one temp
folder as the working directory (the repository's examples/ copied into it) and one temp
`RECSYS_HOME`, with this venv's `recsys` first on PATH, all in at most 120 s per page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- runnable -->"
OPENING = re.compile(r"^```(bash|sh|shell)\s*$")
PAGE_SECONDS = 120.0


@dataclass(frozen=True)
class Block:
    """One runnable block: the line its code starts on, and the code."""

    line: int
    code: str


def runnable_blocks(text: str, opening: re.Pattern[str] = OPENING) -> list[Block]:
    """The marked blocks of a page whose fence `opening` matches (bash), in order."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK or i + 1 >= len(lines) or not opening.match(lines[i + 1]):
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"line {i + 2}: a runnable block without its closing fence")
        blocks.append(Block(i + 3, "\n".join(lines[i + 2 : end]) + "\n"))
    return blocks


def pages_with_blocks() -> list[Path]:
    """README.md and the getting-started pages that have a runnable block."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "getting-started").glob("*.md"))]
    return [p for p in pages if p.exists() and runnable_blocks(p.read_text(encoding="utf-8"))]


def _environment(home: Path) -> dict[str, str]:
    """This process's environment without RECSYS_* settings, the temp home, the venv first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECSYS_")}
    env["RECSYS_HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_blocks(blocks: list[Block], name: str, cwd: Path, env: dict[str, str]) -> str | None:
    """Run `blocks` in order in `cwd`; why the first one failed, or None when all exit 0."""
    deadline = time.monotonic() + PAGE_SECONDS
    for block in blocks:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise subprocess.TimeoutExpired(block.code, PAGE_SECONDS)
            done = subprocess.run(
                ["bash", "-c", "set -euo pipefail\n" + block.code],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=left,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return f"{name}:{block.line}: the page's blocks ran past {PAGE_SECONDS:.0f} s"
        if done.returncode:
            return (
                f"{name}:{block.line}: exit {done.returncode}\n--- block\n{block.code}"
                f"--- stdout (end)\n{done.stdout[-2000:]}--- stderr (end)\n{done.stderr[-2000:]}"
            )
    return None


@pytest.mark.parametrize("page", pages_with_blocks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_runnable_blocks_exit_0(page: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    if (ROOT / "examples").is_dir():
        shutil.copytree(ROOT / "examples", cwd / "examples")
    blocks = runnable_blocks(page.read_text(encoding="utf-8"))
    failure = run_blocks(blocks, str(page.relative_to(ROOT)), cwd, _environment(tmp_path / "home"))
    assert failure is None, failure


def test_only_marked_bash_blocks_are_extracted() -> None:
    page = (
        "# Page\n\n<!-- runnable -->\n```bash\necho one\necho two\n```\n\n"
        "```bash\necho not marked\n```\n\n<!-- runnable -->\n\n```bash\necho not directly\n```\n"
        "<!-- runnable -->\n```python\nprint('not bash')\n```\n"
        "<!-- runnable -->\n```bash\nrecsys --help\n```\n"
    )
    assert runnable_blocks(page) == [
        Block(5, "echo one\necho two\n"),
        Block(24, "recsys --help\n"),
    ]


def test_a_block_without_its_closing_fence_is_an_error() -> None:
    with pytest.raises(ValueError, match="line 2"):
        runnable_blocks("<!-- runnable -->\n```bash\necho never closed\n")


def test_blocks_share_a_folder_and_a_failure_names_its_line(tmp_path: Path) -> None:
    blocks = [
        Block(3, 'test "$RECSYS_HOME" = "$HOME_WANTED"\necho kept > note.txt\n'),
        Block(7, "test -f note.txt\nrecsys --help > /dev/null\n"),
        Block(11, "false | true\necho unreachable\n"),
        Block(15, "echo never run > later.txt\n"),
    ]
    env = {**_environment(tmp_path / "home"), "HOME_WANTED": str(tmp_path / "home")}
    failure = run_blocks(blocks, "page.md", tmp_path, env)
    assert failure is not None and failure.startswith("page.md:11: exit 1")
    assert "unreachable" not in failure.split("--- stdout")[1]
    assert not (tmp_path / "later.txt").exists()
