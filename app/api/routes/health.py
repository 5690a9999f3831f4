"""`GET /health` (liveness), `GET /ready` (503 until a model is loaded), `GET /metrics`."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import service
from app.api.schemas import Health, Status

router = APIRouter(tags=["ops"])


@router.get("/health", response_model=Health)
async def health(request: Request) -> Health:
    """The process is up (says nothing about the model), and the package version it runs."""
    return Health(status="ok", version=request.app.version)


@router.get(
    "/ready",
    response_model=Status,
    response_model_exclude_none=True,
    responses={503: {"model": Status, "description": "No model loaded yet, or none loadable."}},
)
async def ready(request: Request) -> Response | Status:
    """200 when a model is loaded, else 503; both say what is served, published and failed."""
    svc = service(request)
    current, state = svc.current, svc.status()
    failed_at = state.last_error_at
    body = Status(
        status="ready" if current else "not ready",
        model_version=current.version if current else state.served,  # one read: one version
        published_version=state.published,
        index=current.index.describe() if current else None,
        detail=None if current else state.last_error or "loading",
        last_reload_error=state.last_error,
        last_reload_error_at=(
            datetime.fromtimestamp(failed_at, UTC).isoformat(timespec="seconds")
            if failed_at is not None and state.last_error
            else None
        ),
        failed_reloads=state.failed_reloads,
    )
    if current is None:
        return JSONResponse(body.model_dump(exclude_none=True), status_code=503)
    return body


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    body = request.app.state.metrics.render(service(request))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
