"""`recsys ingest` and `recsys synth` (owned by the data layer work)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the data commands."""
