"""`POST /events`: append a batch of events to the store (Bearer $RECSYS_ADMIN_TOKEN; off without).

The rows go through the file ingest's validation and become one atomic part
(`serving.history.HistoryStore.record`), merged into this process's histories before the answer,
so a known user's next /recommend here already encodes them (other replicas: at their next poll).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from app.api.deps import TOKEN_ERRORS, Credentials, check_token, service
from app.api.schemas import ErrorResponse, EventsRequest, EventsResponse, RejectedEvent
from data.errors import RecsysInputError
from data.ingest import HTTP_SOURCE

router = APIRouter(tags=["events"])


async def _authorised(request: Request, credentials: Credentials) -> None:
    """The token, checked as a dependency: before the body's fields are validated."""
    check_token(request, credentials, "POST /events is")


@router.post(
    "/events",
    response_model=EventsResponse,
    responses={
        **TOKEN_ERRORS,
        409: {"model": ErrorResponse, "description": "The event store refused the batch."},
        422: {"model": ErrorResponse},
    },
    dependencies=[Depends(_authorised)],
)
async def post_events(body: EventsRequest, request: Request) -> EventsResponse:
    """Validate and store the events; rejected rows come back with their reasons."""
    rows = [(e.user_id, e.item_id, e.timestamp) for e in body.events]
    try:
        # file I/O and the store's writer lock: on a worker thread, never on the event loop
        report, rejected = await run_in_threadpool(
            service(request).histories.record, rows, HTTP_SOURCE
        )
    except RecsysInputError as err:
        raise HTTPException(409, str(err)) from None
    rejects = [
        RejectedEvent(index=row - 1, reason=reason, **body.events[row - 1].model_dump())
        for row, reason in rejected.select("row", "reason").iter_rows()
    ]
    return EventsResponse(
        ingest_id=report.ingest_id,
        accepted=report.accepted,
        rejected=report.rejected,
        rejects=rejects,
        events_total=report.events_total,
    )
