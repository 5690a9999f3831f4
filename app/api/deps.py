"""Shared route dependencies: the served Recommender (503 until one is loaded), the token."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.schemas import ErrorResponse, Item, RecommendResponse
from serving.batcher import RequestBatcher
from serving.recommender import Recommender, Result, ScoredItem
from serving.service import ModelService, ServiceStatus


def service(request: Request) -> ModelService:
    """The app's ModelService."""
    svc: ModelService = request.app.state.service
    return svc


# The dependencies are `async def` so that FastAPI runs them on the event loop: a plain
# `def` dependency costs every request a hop to the thread pool.


async def batcher(request: Request) -> RequestBatcher:
    """The app's RequestBatcher (every /recommend goes through it)."""
    found: RequestBatcher = request.app.state.batcher
    return found


# The answer of `recommender` below, documented on every route that reads the model.
NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorResponse, "description": "No model loaded yet, or none loadable."},
}


async def recommender(request: Request) -> Recommender:
    """The Recommender serving now, read once so a request never straddles a reload."""
    svc = service(request)
    current = svc.current
    if current is None:
        raise HTTPException(503, _not_ready_detail(svc.status()))
    return current


def _not_ready_detail(state: ServiceStatus) -> str:
    """Why no model answers yet, as /ready knows it: the last load's error, or what loads."""
    if state.last_error:  # a refused bundle, an unreadable CURRENT, or nothing published
        return f"no model loaded: {state.last_error}"
    if state.published:
        return f"no model loaded yet: loading {state.published}"
    return "no model loaded yet; train one with `recsys train`"


# The admin token as the schema's security scheme (so clients and fuzzers know the routes need
# it); auto_error off: check_token answers, 404 when no token is set, before any 401.
BEARER = HTTPBearer(
    auto_error=False,
    description="$RECSYS_ADMIN_TOKEN; a route it guards answers 404 while none is set.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]
# The answers of check_token, documented on each route it guards.
TOKEN_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "No bearer token, or a wrong one."},
    404: {"model": ErrorResponse, "description": "No RECSYS_ADMIN_TOKEN set: the route is off."},
}


def check_token(
    request: Request, credentials: HTTPAuthorizationCredentials | None, what: str
) -> None:
    """Refuse a request without `Bearer $RECSYS_ADMIN_TOKEN`.

    404 when no token is set (`what`, e.g. "admin routes are", names what is then off), 401
    when the header is missing, of another scheme, or the token wrong.
    """
    token = request.app.state.settings.admin_token
    if not token:
        raise HTTPException(404, f"{what} disabled (no RECSYS_ADMIN_TOKEN set)")
    # Bytes, not str: compare_digest refuses non-ASCII str. The server decodes header bytes as
    # latin-1, so encoding back to latin-1 gives the bytes sent: a UTF-8 token's bytes.
    if credentials is None or not hmac.compare_digest(
        credentials.credentials.encode("latin-1"), token.encode()
    ):
        raise HTTPException(
            401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )


def once_each(*names: str) -> Callable[[Request], Awaitable[None]]:
    """A dependency refusing (422) a single-valued query parameter given more than once.

    FastAPI would answer for the last value (`?user_id=a&user_id=b` is user b's answer).
    """

    async def refuse_repeats(request: Request) -> None:
        repeated = [n for n in names if len(request.query_params.getlist(n)) > 1]
        if repeated:
            message = "given more than once; send it once"
            raise RequestValidationError(
                [{"type": "repeated", "loc": ("query", n), "msg": message} for n in repeated]
            )

    return refuse_repeats


Rec = Annotated[Recommender, Depends(recommender)]
Batcher = Annotated[RequestBatcher, Depends(batcher)]


def item_out(item: ScoredItem) -> Item:
    """API form of a scored item."""
    return Item(item_id=item.item_id, score=round(item.score, 6), title=item.title)


def response_of(result: Result) -> RecommendResponse:
    """API form of a Recommender result."""
    return RecommendResponse(
        items=[item_out(i) for i in result.items],
        model_version=result.model_version,
        strategy="model" if result.strategy == "model" else "popular",
        warnings=result.warnings,
    )
