"""Log lines that a client cannot forge: control characters in messages are escaped.

A request path is client-chosen text, and `%0A` decodes to a newline: logged as it is, it
would end the line and start a fake one. Every message goes through `escape_controls`, so
no text from outside can break a line (tracebacks, which the formatter appends after the
message, keep their own newlines).
"""

from __future__ import annotations

import logging

_LINE_BREAKING = [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]
_ESCAPES = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _LINE_BREAKING}


def escape_controls(text: str) -> str:
    """`text` with every control character (tab aside) and line separator written as an escape."""
    return text.translate(_ESCAPES)


class SafeFormatter(logging.Formatter):
    """A Formatter whose message part never holds a raw control character."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        """Escape the message, then format it as usual."""
        record.message = escape_controls(record.message)
        return super().formatMessage(record)
