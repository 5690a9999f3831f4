"""Generated blocks in a markdown page: `<!-- generated:NAME -->` ... `<!-- /generated:NAME -->`.

A block's body is whatever lies between its two marker lines; the generator owns it, the rest
of the page is hand-written.
"""

from __future__ import annotations


def markers(name: str) -> tuple[str, str]:
    """The opening and closing marker lines of block `name`."""
    return f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"


def body(text: str, name: str) -> str | None:
    """The body of block `name` in `text`, or None where the page has no such block."""
    begin, end = markers(name)
    if begin not in text or end not in text.split(begin, 1)[1]:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0]


def fill(text: str, name: str, new_body: str) -> str:
    """`text` with block `name`'s body replaced by `new_body` (the block must be there)."""
    begin, end = markers(name)
    head, rest = text.split(begin, 1)
    return f"{head}{begin}{new_body}{end}{rest.split(end, 1)[1]}"
