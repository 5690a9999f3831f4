"""`python -m app` runs the `recsys` CLI."""

from app.cli import main

main()
