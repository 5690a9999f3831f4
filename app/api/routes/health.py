"""`GET /health` (liveness), `GET /ready` (503 until a model is loaded), `GET /metrics`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import service
from app.api.schemas import Status

router = APIRouter(tags=["ops"])


@router.get("/health", response_model=Status, response_model_exclude_none=True)
async def health() -> Status:
    """The process is up (says nothing about the model)."""
    return Status(status="ok")


@router.get("/ready", response_model=Status, response_model_exclude_none=True, responses={503: {}})
async def ready(request: Request) -> Response | Status:
    """200 with the model version and index when a model is loaded, else 503."""
    svc = service(request)
    current = svc.current
    if current is None:
        detail = svc.last_error or "loading"
        body = Status(status="not ready", detail=detail).model_dump(exclude_none=True)
        return JSONResponse(body, status_code=503)
    return Status(status="ready", model_version=current.version, index=current.index.describe())


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    body = request.app.state.metrics.render(service(request))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
