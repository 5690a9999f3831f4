"""`POST /admin/reload`: load models/CURRENT now (Bearer $RECSYS_ADMIN_TOKEN; off without one)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from app.api.deps import check_token, service
from app.api.schemas import ErrorResponse, ReloadResponse
from data.errors import RecsysInputError

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post(
    "/reload",
    response_model=ReloadResponse,
    responses={401: {"model": ErrorResponse}, 404: {}, 409: {"model": ErrorResponse}},
)
async def reload(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> ReloadResponse:
    """Load the version in models/CURRENT; the old model serves until the new one is built."""
    check_token(request, authorization, "admin routes are")
    svc = service(request)
    try:
        # built on a worker thread: the event loop keeps answering on the old model
        result = await run_in_threadpool(svc.reload)
    except RecsysInputError as err:
        serving = "the old model keeps serving" if svc.current is not None else "no model is served"
        raise HTTPException(409, f"reload failed, {serving}: {err}") from None
    return ReloadResponse(
        changed=result.changed,
        model_version=result.version,
        previous=result.previous,
        seconds=round(result.seconds, 3),
    )
