"""The generated reference pages: docs/reference/cli.md, config.md, http-api.md, openapi.json.

Each page is written from the code it describes (the typer app, the pydantic config, the
FastAPI app's OpenAPI schema) by `python -m scripts.reference_docs`, run from the repository
root; tests/docs/test_reference_docs.py fails when a committed page differs from what this
writes. The product never knows these paths: the generator reads it, not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

COMMAND = "python -m scripts.reference_docs"
ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("docs/reference")


def renderers() -> dict[Path, Callable[[], str]]:
    """Each generated file (relative to the repository root) and the function writing it."""
    from scripts.reference_docs import cli_page, config_page, http_page

    return {
        REFERENCE / "cli.md": lambda: cli_page.render(COMMAND),
        REFERENCE / "config.md": lambda: config_page.render(COMMAND),
        REFERENCE / "http-api.md": lambda: http_page.render(COMMAND),
        REFERENCE / "openapi.json": http_page.openapi_json,
    }
