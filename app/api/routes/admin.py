"""`POST /admin/reload`: load models/CURRENT now (Bearer $RECSYS_ADMIN_TOKEN; off without one)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from app.api.deps import TOKEN_ERRORS, Credentials, check_token, service
from app.api.schemas import ErrorResponse, ReloadResponse
from data.errors import RecsysInputError

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post(
    "/reload",
    response_model=ReloadResponse,
    responses={
        **TOKEN_ERRORS,
        409: {"model": ErrorResponse, "description": "The published model could not be loaded."},
    },
)
async def reload(request: Request, credentials: Credentials) -> ReloadResponse:
    """Load the version in models/CURRENT; the old model serves until the new one is built."""
    check_token(request, credentials, "admin routes are")
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
