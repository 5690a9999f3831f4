"""`app.cli.main`: exit codes and one stderr line for whatever a command raises."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from app.cli import app, main


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real entry point in-process: (exit code, stdout, stderr)."""
    saved = sys.argv
    sys.argv = ["recsys", *args]
    try:
        with pytest.raises(SystemExit) as stop:
            main()
    finally:
        sys.argv = saved
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out, out.err


@pytest.fixture
def raising() -> Iterator[None]:
    """A `raise KIND` command on the real app (what a library may raise inside any command)."""
    kinds = {"eof": EOFError("No data left in file"), "interrupt": KeyboardInterrupt()}

    def raise_(kind: str) -> None:
        """Raise the named exception."""
        raise kinds[kind]

    app.command("raise")(raise_)
    yield
    app.registered_commands.pop()


@pytest.mark.usefixtures("raising")
def test_a_raw_eof_error_is_one_line_naming_it_not_aborted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _main(capsys, "raise", "eof")
    assert (code, out) == (1, "")
    assert err == "error: EOFError: No data left in file (-v for details)\n"


@pytest.mark.usefixtures("raising")
def test_an_interrupt_is_exit_130_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(capsys, "raise", "interrupt") == (130, "", "interrupted\n")


def test_help_usage_errors_and_a_bare_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "--help")
    assert code == 0 and "train" in out and err == ""
    code, out, err = _main(capsys, "trian")
    assert code == 2 and out == "" and "No such command 'trian'" in err
    code, out, err = _main(capsys)  # no arguments: the help, on stdout only
    assert code == 2 and "train" in out and err == ""
