"""Comma-separated option values shared by the `recsys bench` commands."""

from __future__ import annotations

from data.errors import RecsysInputError


def names(text: str, option: str) -> list[str]:
    """`"a, b,,c"` -> `["a", "b", "c"]`; an empty list is an input error naming `--option`."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values:
        raise RecsysInputError(f"--{option} needs at least one value")
    return values


def ints(text: str, option: str) -> list[int]:
    """`"10000,100000"` -> `[10000, 100000]`; anything but positive integers is an input error."""
    values = names(text, option)
    try:
        parsed = [int(v) for v in values]
    except ValueError:
        raise RecsysInputError(
            f"--{option}: expected comma-separated integers, got {text!r}"
        ) from None
    if any(v < 1 for v in parsed):
        raise RecsysInputError(f"--{option}: values must be positive, got {text!r}")
    return parsed
