"""`GET /similar/{item_id}` and `GET /items/{item_id}` (404 for an item the model lacks)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.api.deps import NOT_READY, Batcher, Rec, item_out, once_each
from app.api.schemas import MAX_K, ErrorResponse, ItemResponse, SimilarResponse

router = APIRouter(tags=["items"])
ERRORS: dict[int | str, dict[str, object]] = {
    404: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    **NOT_READY,
}


@router.get(
    "/similar/{item_id:path}",
    response_model=SimilarResponse,
    response_model_exclude_none=True,
    responses=ERRORS,
    dependencies=[Depends(once_each("k"))],
)
async def similar(
    item_id: str, rec: Rec, batch: Batcher, k: Annotated[int, Query(ge=1, le=MAX_K)] = 10
) -> SimilarResponse:
    """The k items nearest to `item_id` in the item embedding space.

    The index search runs on the model thread (with its thread cap), not the event loop.
    """
    items = await batch.run_on_model_thread(rec.similar, item_id, k)
    return SimilarResponse(
        item_id=item_id, items=[item_out(i) for i in items], model_version=rec.version
    )


@router.get("/items/{item_id:path}", response_model=ItemResponse, responses=ERRORS)
async def item(item_id: str, rec: Rec) -> ItemResponse:
    """Title and popularity (training interactions) of one item."""
    idx = rec.item_idx(item_id)
    return ItemResponse(
        item_id=item_id,
        title=rec.bundle.titles[idx],
        popularity=int(rec.bundle.popularity[idx]),
        model_version=rec.version,
    )
