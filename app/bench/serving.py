"""`recsys bench`: the serving load benchmark."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Attach this benchmark's subcommand."""
