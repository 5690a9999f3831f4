"""Every relative link in README.md and docs/ resolves: to a file, and `#anchor` to a heading.

docs/benchmarks/archive/ is the unchanged old notebook and is not checked (links into it are).
Anchors follow GitHub's rule: the heading's text in lower case, punctuation dropped, spaces
to '-', and '-1', '-2', ... after repeats; `<a id=...>`/`<a name=...>` tags count too.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "docs" / "benchmarks" / "archive"
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+\"[^\"]*\")?\s*\)"
)
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"(`+).*?\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def checked_pages() -> list[Path]:
    """README.md and every page under docs/ but the archive."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages if p.exists() and ARCHIVE not in p.parents]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, CODE_SPAN.sub("", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (markdown links and emphasis reduced to their text)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every anchor a page has: its headings' (numbered on repeats) and its HTML anchors."""
    seen: dict[str, int] = {}
    found = set()
    text = page.read_text(encoding="utf-8")
    for _, line in _heading_lines(text):
        base = slug(line)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(text))
    return frozenset(found)


def _heading_lines(text: str) -> list[tuple[int, str]]:
    """(line number, heading text) of the ATX headings outside code blocks (code kept)."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append((number, match.group(2)))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and link definition in prose."""
    found = []
    for number, line in prose_lines(text):
        targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
        if definition := DEFINITION.match(line):
            targets.append(definition.group(1))
        found += [(number, target.strip("<>")) for target in targets]
    return found


def dead_link(page: Path, target: str) -> str | None:
    """Why `target` (a link in `page`) is dead, or None when it resolves."""
    if EXTERNAL.match(target) or target.startswith("//"):
        return None
    path, _, fragment = target.partition("#")
    resolved = (page.parent / unquote(path)).resolve() if path else page
    if not resolved.exists():
        return "no such file"
    if fragment and resolved.suffix == ".md" and unquote(fragment) not in anchors(resolved):
        return f"no heading #{fragment} in {resolved.name}"
    return None


@pytest.mark.parametrize("page", checked_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    dead = [
        f"{page.relative_to(ROOT)}:{number}: {target} ({reason})"
        for number, target in links(page.read_text(encoding="utf-8"))
        if (reason := dead_link(page, target))
    ]
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_the_checker_reads_links_and_anchors_as_github_does(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## GET /items/{item_id}\n", encoding="utf-8")
    page.write_text(
        '# A `code` heading: it\'s *here*!\n\n## Step\n\n## Step\n\n<a id="custom"></a>\n'
        "[ok](other.md#get-itemsitem_id) [self](#a-code-heading-its-here) [two](#step-1)\n"
        "[custom](#custom) ![img](other.md) [web](https://example.com/x#y) `[no](gone.md)`\n"
        "[ref]: other.md#other\n```\n[fenced](gone.md)\n```\n"
        "[bad](gone.md) [bad anchor](other.md#nope) [bad self](#step-2)\n",
        encoding="utf-8",
    )
    found = links(page.read_text(encoding="utf-8"))
    dead = [(n, t) for n, t in found if dead_link(page, t)]
    assert [t for _, t in found if not dead_link(page, t)] == [
        "other.md#get-itemsitem_id",
        "#a-code-heading-its-here",
        "#step-1",
        "#custom",
        "other.md",
        "https://example.com/x#y",
        "other.md#other",
    ]
    assert dead == [(14, "gone.md"), (14, "other.md#nope"), (14, "#step-2")]
