"""The FastAPI application factory: settings -> ModelService -> routes, middleware, errors."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import metadata

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from app.api.errors import EVERY_ROUTE_ERRORS, install_error_handlers
from app.api.metrics import Metrics
from app.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from app.api.routes import admin, events, health, items, recommend
from app.api.settings import Settings
from serving.batcher import RequestBatcher
from serving.service import ModelService

log = logging.getLogger(__name__)


def _start_loading(svc: ModelService, interval: float) -> None:
    """First load on a thread (so /health answers while a big index builds), then poll."""
    if interval > 0:
        svc.start_polling(interval)
    else:
        threading.Thread(target=svc.poll_once, name="recsys-first-load", daemon=True).start()


def create_app(settings: Settings | None = None, svc: ModelService | None = None) -> FastAPI:
    """Build the app.

    Args:
        settings: Server settings; read from the environment when None.
        svc: A ModelService to serve from (tests); built from the settings when None, and
            then loaded and polled in the background once the app starts.

    """
    settings = settings or Settings()
    owned = svc is None
    # The event loop parses requests while the model thread runs the tower and the search:
    # one OpenMP thread there (settings.threads) leaves the loop a core, where extra OpenMP
    # workers (which spin between parallel regions) would take it as latency spikes.
    svc = svc or ModelService(settings.workspace(), settings.index_params(), settings.threads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if owned:
            _start_loading(svc, settings.reload_interval)
        yield
        svc.stop()
        batcher.close()

    app = FastAPI(
        title="recsys",
        summary="Two-tower next-item recommendations served from a faiss index.",
        version=metadata.version("recsys"),  # the schema's info.version and /health's
        lifespan=lifespan,
        responses=EVERY_ROUTE_ERRORS,
        strict_content_type=False,  # `curl -d '{...}'` without a JSON content type still works
    )
    app.state.settings = settings
    app.state.service = svc
    app.state.metrics = Metrics()
    app.state.batcher = batcher = RequestBatcher(settings.max_batch, settings.threads)
    for module in (recommend, items, health, admin, events):
        app.include_router(module.router)
    install_error_handlers(app)
    # add_middleware puts each one outside those added before it: metrics, then CORS, then the
    # body limit, so that the limit's own 413 answers still carry the CORS headers
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    if settings.cors_origins:  # Authorization: a browser may send the token (/events, /admin)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(
        MetricsMiddleware, metrics=app.state.metrics, log_requests=settings.access_log
    )
    return app
