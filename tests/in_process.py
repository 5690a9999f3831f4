"""A command-line entry point run in this process, with the exit code and streams a shell sees."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest


def run_main(
    main: Callable[[], object], prog: str, capsys: pytest.CaptureFixture[str], *args: str
) -> subprocess.CompletedProcess[str]:
    """`prog ARGS` through `main()` in this process: its exit code, stdout and stderr."""
    capsys.readouterr()
    saved = sys.argv
    sys.argv = [prog, *args]
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        sys.argv = saved
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)
