"""Error responses: one JSON shape `{"detail": message}`; 422s name every failing field."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match

from app.api.schemas import ErrorResponse
from serving.recommender import UnknownItemError

log = logging.getLogger(__name__)


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in ("body", "query", "path"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def _message(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "json_invalid":
        return f"malformed JSON ({err.get('ctx', {}).get('error', 'cannot parse')})"
    if kind == "missing" and tuple(err.get("loc", ())) == ("body",):
        return "a JSON body is required"
    if tuple(err.get("loc", ())) == ("body",) and kind in ("model_attributes_type", "dict_type"):
        return "must be a JSON object (send Content-Type: application/json)"
    if kind == "extra_forbidden":
        return "unknown field"
    return str(err.get("msg", "invalid"))


def describe_validation(errors: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """[{field, message}] for each pydantic error, with field as a dotted path."""
    out = []
    for err in errors:
        loc = err.get("loc", ())
        field = "body" if err.get("type") == "json_invalid" else _field(loc)
        out.append({"field": field, "message": _message(err)})
    return out


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = describe_validation(exc.errors())
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse({"detail": detail, "errors": errors}, status_code=422)


def _documented(description: str) -> dict[str, Any]:
    """An OpenAPI `responses` entry: an ErrorResponse body, and when it is sent."""
    return {"model": ErrorResponse, "description": description}


# Answers any operation can give, documented on every one of them (OpenAPI `responses`).
EVERY_ROUTE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _documented("A request the HTTP parser refuses (malformed request line or headers)."),
    413: _documented("A body (declared or streamed) above RECSYS_MAX_BODY_BYTES."),
    414: _documented("A URL of 65,536 bytes or more (the HTTP parser's limit)."),
}


# FastAPI's 400 when reading or decoding a body raised anything but a JSONDecodeError; the
# exception it chains tells why: not UTF-8, nested too deeply, an integer of too many digits.
BODY_PARSE_ERROR = "There was an error parsing the body"


def _body_parse_message(cause: BaseException | None) -> str:
    """What was wrong with a body FastAPI could not parse, from the exception it chained."""
    if isinstance(cause, UnicodeDecodeError):
        return "malformed JSON (not valid UTF-8)"
    if isinstance(cause, RecursionError):
        return "malformed JSON (nested too deeply)"
    if isinstance(cause, ValueError):  # int() refuses integers longer than this
        return f"malformed JSON (an integer of more than {sys.get_int_max_str_digits()} digits)"
    return "the body could not be read or parsed"


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route accepts on this request's path (for `Allow`), OPTIONS included.

    Asked of the routes themselves, one method at a time (a route matches FULL only with one
    of its methods), so routers included with a prefix count like any other.
    """
    allowed = ["OPTIONS"]
    for method in METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.routes):
            allowed.append(method)
    return allowed


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400 and exc.detail == BODY_PARSE_ERROR:
        error = {"field": "body", "message": _body_parse_message(exc.__cause__)}
        return JSONResponse({"detail": "body: " + error["message"], "errors": [error]}, 422)
    if exc.status_code == 405:
        allow = {"Allow": ", ".join(allowed_methods(request))}
        if request.method == "OPTIONS":  # what may be sent here: no error, no body
            return Response(status_code=204, headers=allow)
        return JSONResponse({"detail": exc.detail}, 405, headers=allow)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _unknown_item(_request: Request, exc: Exception) -> JSONResponse:
    item_id = exc.args[0] if exc.args else ""
    return JSONResponse(
        {"detail": f"unknown item_id {item_id!r} in the served model"}, status_code=404
    )


async def _internal(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error", exc_info=exc)
    return JSONResponse({"detail": f"internal error: {type(exc).__name__}"}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on `app`."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(UnknownItemError, _unknown_item)
    app.add_exception_handler(Exception, _internal)
