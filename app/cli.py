"""The `recsys` command-line entry point: wires the command modules and maps errors to exit codes.

Exit codes: 0 ok, 1 failure, 2 bad input (unreadable file, bad option, bad config).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError
from typer.exceptions import TyperException

from app.cli_common import setup_logging
from app.commands import bench, clean_cmds, data_cmds, serve_cmds, train_cmds, tune_cmds
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


for module in (data_cmds, train_cmds, tune_cmds, serve_cmds, clean_cmds, bench):
    module.register(app)


def _first_line(err: BaseException) -> str:
    """The message's first line: errors are one line on stderr, whatever the library wrote."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _run(args: list[str]) -> int:
    """Parse and run one command line; every exception a command raises leaves as it was.

    The CLI library's own runner is not used: it turns an EOFError raised in a command into
    an empty line and a bare "Aborted!", and a KeyboardInterrupt into a silent exit.
    """
    command = typer.main.get_command(app)
    try:
        with command.make_context("recsys", args) as ctx:
            command.invoke(ctx)
    except typer.Exit as done:  # --help, or a command's own exit code
        return done.exit_code
    return 0


def main() -> None:
    """Run the CLI; bad input exits 2 with one line on stderr, other failures exit 1.

    Usage errors are shown as the CLI library words them (exit 2), `--help` exits 0, an
    interrupt exits 130.
    """
    try:
        code = _run(sys.argv[1:])
    except NoArgsIsHelpError as err:  # bare `recsys`: the help (rich has printed it already)
        if text := err.format_message().strip():
            sys.stdout.write(f"{text}\n")
        sys.exit(err.exit_code)
    except TyperException as err:  # usage errors: the library's own message
        show = getattr(err, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {err.format_message()}\n")
        sys.exit(err.exit_code)
    except Exception as err:
        _fail(err)
    except KeyboardInterrupt as err:
        _fail(err)
    sys.exit(code)


def _fail(err: BaseException) -> NoReturn:
    """One line on stderr and the exit code of the error's kind."""
    if isinstance(err, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    if isinstance(err, RecsysInputError):
        sys.stderr.write(f"error: {_first_line(err)}\n")
        sys.exit(2)
    log.debug("unhandled error", exc_info=err)  # the one place that turns a crash into exit 1
    sys.stderr.write(f"error: {type(err).__name__}: {_first_line(err)} (-v for details)\n")
    sys.exit(1)
