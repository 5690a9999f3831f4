"""The CLI's logging setup escapes control characters in every message, by construction."""

from __future__ import annotations

import subprocess
import sys

from app.log_format import escape_controls
from tests.serving.server import REPO_ROOT

# Logs a client-chosen id through an ordinary logger (not the access line, which escapes its
# own fields), then an exception whose traceback the formatter appends after the message.
SCRIPT = r"""
import logging
from app.cli_common import setup_logging
setup_logging(verbose=False)
log = logging.getLogger("recsys.test")
log.warning("unknown id %r", "x\nFAKE forged line\u2028\x85\x1b[31m")
log.warning("plain %s", "x\nFAKE forged line")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("failed on %s", "y\r\nFAKE second")
"""


def test_setup_logging_escapes_messages_but_keeps_tracebacks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith("FAKE")], done.stderr
    assert "WARNING recsys.test: plain x\\x0aFAKE forged line" in lines[1]
    assert "failed on y\\x0d\\x0aFAKE second" in lines[2]
    assert lines[3] == "Traceback (most recent call last):"  # the traceback keeps its lines
    assert lines[-1] == "ValueError: boom"


def test_escape_controls_covers_every_line_break_python_knows() -> None:
    breaks = "".join(ch for ch in map(chr, range(0x3000)) if len(f"a{ch}b".splitlines()) > 1)
    escaped = escape_controls(breaks + "\x00\x1b\x7f")
    assert escaped.isprintable() and len(escaped.splitlines()) == 1
    assert escape_controls("tab\tand text é ü 中") == "tab\tand text é ü 中"
