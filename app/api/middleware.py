"""Pure ASGI middleware: request size limit (413), metrics and one access-log line per request.

The access line escapes control characters in the client-chosen method and path. Pure ASGI
(not BaseHTTPMiddleware) because it sits on every request's latency.
"""

from __future__ import annotations

import json
import logging
import time

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.metrics import Metrics
from app.log_format import escape_controls

access_log = logging.getLogger("recsys.access")


class _TooLarge(HTTPException):
    """Raised from `receive`; an HTTPException so that FastAPI's body parsing passes it on."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes")


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Refuse bodies above `limit` bytes with 413: by Content-Length, and while streaming."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        """Wrap `app`."""
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count the streamed bytes."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_413(send, self.limit)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _TooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_413(send, self.limit)


class MetricsMiddleware:
    """Time every request; count it by method, route template and status; log one line."""

    def __init__(self, app: ASGIApp, metrics: Metrics, log_requests: bool = True) -> None:
        """Wrap `app`."""
        self.app = app
        self.metrics = metrics
        self.log_requests = log_requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request and record it, whatever the outcome."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def status_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, status_send)
        finally:
            seconds = time.perf_counter() - start
            route = _route_template(scope)
            self.metrics.observe(scope["method"], route, status, seconds)
            if self.log_requests:
                method, path = escape_controls(scope["method"]), escape_controls(scope["path"])
                access_log.info("%s %s %d %.1fms", method, path, status, seconds * 1000)


def _route_template(scope: Scope) -> str:
    """The matched route's template as OpenAPI writes it (`/items/{item_id}`, no converter)."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(path) if path else "unmatched"
