"""uvicorn's httptools protocol, answering requests it cannot parse with our JSON errors.

Requests the HTTP parser rejects never reach the app: malformed request lines, and URLs of
64 KiB or more (httptools keeps URL offsets in 16 bits). uvicorn answers those in plain text;
this subclass keeps every error of the service `{"detail": ...}`: 414 for an over-long URL,
400 for anything else the parser refuses.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

MAX_URL_BYTES = 65535  # the longest URL httptools parses


class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol whose parser-level error answers are JSON."""

    def send_400_response(self, msg: str) -> None:
        """Answer a request the parser refused, then close the connection (as uvicorn does)."""
        status, detail = 400, f"invalid HTTP request ({msg.rstrip('.')})"
        if len(self.url) > MAX_URL_BYTES:
            status, detail = 414, f"URL longer than {MAX_URL_BYTES} bytes"
        body = json.dumps({"detail": detail}).encode()
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        self.transport.close()
