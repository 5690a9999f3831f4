"""The `recsys` command-line entry point: wires the command modules and maps errors to exit codes.

Exit codes: 0 ok, 1 failure, 2 bad input (unreadable file, bad option, bad config), 130
interrupted, 141 stdout's reader gone (`recsys models list | head -1`).
"""

from __future__ import annotations

import inspect
import logging
import os
import select
import signal
import sys
from importlib.metadata import version
from typing import Annotated

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


def _print_version(asked: bool) -> None:
    """`--version`: print `recsys X.Y.Z` (the installed package's version) and exit 0."""
    if asked:
        typer.echo(f"recsys {version('recsys')}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    setup_logging(verbose)


def _help_from_docstrings(group: typer.Typer) -> None:
    """Each command's help: its docstring's paragraphs, each joined into one line.

    Typer keeps a docstring's line breaks, and rich wraps those lines again at the terminal's
    width, which breaks sentences in the middle of a line.
    """
    for command in group.registered_commands:
        if command.help is None and command.callback is not None:
            paragraphs = inspect.cleandoc(command.callback.__doc__ or "").split("\n\n")
            command.help = "\n\n".join(" ".join(text.split()) for text in paragraphs)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _help_from_docstrings(sub.typer_instance)


for module in (data_cmds, train_cmds, tune_cmds, serve_cmds, clean_cmds, bench):
    module.register(app)
_help_from_docstrings(app)


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
    interrupt exits 130. A reader that closed the pipe before the output was written ends the
    command quietly with 141, the status of a process SIGPIPE killed (what `head` leaves
    `cat` with, and what `set -o pipefail` scripts expect): not 0, since output was lost, and
    not 1, which is a failure of the command itself.
    """
    try:
        code = _exit_code(sys.argv[1:])
        sys.stdout.flush()  # a reader gone shows here, not at the interpreter's exit
    except (BrokenPipeError, SystemExit) as err:
        if not _reader_gone(err):
            raise  # a command's own exit
        # as Python's docs advise: stdout to devnull, so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    sys.exit(code)


def _stdout_gone() -> bool:
    """True when stdout is a pipe whose reader has closed it (poll reports an error on it).

    A stdout without a descriptor (captured) counts as gone: the error came from writing it.
    """
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
        return True
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _reader_gone(err: BaseException) -> bool:
    """A closed stdout pipe: a BrokenPipeError, or rich's exit in its handler of one (help)."""
    return isinstance(err, BrokenPipeError) or isinstance(err.__context__, BrokenPipeError)


def _exit_code(args: list[str]) -> int:
    """Run one command line; its exit code, after one line on stderr for an error."""
    try:
        return _run(args)
    except BrokenPipeError as err:
        if _stdout_gone():
            raise  # stdout's reader is gone: `main` ends quietly
        return _failure(err)  # another pipe or socket of the command's: a failure
    except NoArgsIsHelpError as err:  # bare `recsys`: the help (rich has printed it already)
        if text := err.format_message().strip():
            sys.stdout.write(f"{text}\n")
        return err.exit_code
    except TyperException as err:  # usage errors: the library's own message
        show = getattr(err, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {err.format_message()}\n")
        return err.exit_code
    except (Exception, KeyboardInterrupt) as err:
        return _failure(err)


def _failure(err: BaseException) -> int:
    """One line on stderr; the exit code of the error's kind."""
    if isinstance(err, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        return 130
    if isinstance(err, RecsysInputError):
        sys.stderr.write(f"error: {_first_line(err)}\n")
        return 2
    log.debug("unhandled error", exc_info=err)  # the one place that turns a crash into exit 1
    sys.stderr.write(f"error: {type(err).__name__}: {_first_line(err)} (-v for details)\n")
    return 1
