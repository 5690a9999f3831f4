"""Markdown pieces the reference pages share: tables whose cells survive any text, and values.

Cells are escaped for GitHub's tables: `|` splits a row even inside a code span, and a `<`
outside one would start an HTML tag that swallows the text after it.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from pathlib import PurePath
from typing import Any

CODE_SPAN = re.compile(r"(`[^`]*`)")


def cell(text: str) -> str:
    """`text` as one table cell: on one line, `|` escaped, and `<` outside code spans."""
    return escape(" ".join(text.split())).replace("|", "\\|")


def escape(text: str) -> str:
    """`text` with each `<` outside code spans written `&lt;`, so no tag swallows the rest."""
    parts = CODE_SPAN.split(text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub table; every cell goes through `cell`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(text) for text in row) + " |" for row in rows]
    return "\n".join(lines)


def code(value: Any) -> str:
    """A value as it is written in YAML or on a command line, in a code span."""
    if isinstance(value, Enum):
        value = value.value
    text = str(value) if isinstance(value, str | PurePath) else json.dumps(value, default=str)
    return f"`{text}`"


def paragraphs(doc: str | None) -> str:
    """A docstring or help text with each paragraph joined into one line."""
    text = inspect.cleandoc(doc or "").replace("\b", "")
    return "\n\n".join(escape(" ".join(p.split())) for p in text.split("\n\n") if p.strip())


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of `doc`, on one line ('' for none)."""
    return paragraphs(doc).split("\n\n")[0]


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def bound(low: Any, high: Any, exclusive: tuple[bool, bool] = (False, False)) -> str:
    """A range such as '≥ 1', '> 0, ≤ 1' (empty for none)."""
    parts = []
    if low is not None:
        parts.append(f"{'>' if exclusive[0] else '≥'} {_number(low)}")
    if high is not None:
        parts.append(f"{'<' if exclusive[1] else '≤'} {_number(high)}")
    return ", ".join(parts)


def _number(value: Any) -> str:
    """A bound as people write it: 1000, not 1000.0; 1e-06 as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)
