"""`recsys train and recsys evaluate`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the commands of this module."""
