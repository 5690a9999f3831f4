"""The `recsys` command-line entry point: wires the command modules and maps errors to exit codes.

Exit codes: 0 ok, 1 failure, 2 bad input (unreadable file, bad option, bad config).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from app.cli_common import setup_logging
from app.commands import bench, clean_cmds, data_cmds, serve_cmds, train_cmds
from data.errors import RecsysInputError

log = logging.getLogger("recsys")

app = typer.Typer(
    name="recsys",
    help="Train two-tower next-item retrieval models with smart negative sampling, and serve them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    setup_logging(verbose)


for module in (data_cmds, train_cmds, serve_cmds, clean_cmds, bench):
    module.register(app)


def _first_line(err: Exception) -> str:
    """The message's first line: errors are one line on stderr, whatever the library wrote."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def main() -> None:
    """Run the CLI; bad input exits 2 with one line on stderr, other failures exit 1.

    Usage errors and `--help` are handled by the CLI library itself (exit 2 and 0).
    """
    try:
        app()
    except RecsysInputError as err:
        sys.stderr.write(f"error: {_first_line(err)}\n")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as err:  # the one place that turns a crash into exit 1
        log.debug("unhandled error", exc_info=True)
        sys.stderr.write(f"error: {type(err).__name__}: {_first_line(err)} (-v for details)\n")
        sys.exit(1)
