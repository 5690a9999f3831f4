"""The generated reference pages are what the generator writes from the code now.

A page that differs was not regenerated after a change to the CLI, the config or the API.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.reference_docs import COMMAND, ROOT, renderers

PAGES = renderers()


@pytest.mark.parametrize("page", sorted(PAGES), ids=str)
def test_committed_page_is_current(page: Path) -> None:
    committed = ROOT / page
    assert committed.exists(), f"{page} is missing: run `{COMMAND}` from the repository root"
    current = PAGES[page]()
    stale = committed.read_text(encoding="utf-8") != current
    assert not stale, f"{page} is stale: run `{COMMAND}` from the repository root"


def test_cli_page_lists_every_command() -> None:
    text = (ROOT / "docs/reference/cli.md").read_text(encoding="utf-8")
    for command in ("recsys train", "recsys models rollback", "recsys bench quality"):
        assert f"\n## {command}\n" in text
