"""`GET|POST /recommend` and `POST /recommend/batch`: thin routes over the Recommender."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from app.api.deps import NOT_READY, Batcher, Rec, once_each, response_of
from app.api.schemas import (
    MAX_BATCH_ITEMS,
    MAX_HISTORY,
    MAX_ID_LENGTH,
    MAX_K,
    BatchRequest,
    BatchResponse,
    ErrorResponse,
    ItemId,
    RecommendRequest,
    RecommendResponse,
)
from serving.recommender import Query as RecQuery

router = APIRouter(tags=["recommend"])
ERRORS: dict[int | str, dict[str, Any]] = {422: {"model": ErrorResponse}, **NOT_READY}


def _never_null(schema: dict[str, Any]) -> None:
    """Drop the null branch of an optional query parameter's schema, in place.

    A query string cannot send null (absent is the default), and the branch made the schema
    call `?items=0.0` a violation where the server rightly reads the id "0.0".
    """
    (branch,) = [s for s in schema.pop("anyOf") if s != {"type": "null"}]
    schema.update(branch)


def _query(body: RecommendRequest) -> RecQuery:
    return RecQuery(body.user_id, tuple(body.items), body.k, body.exclude_seen)


@router.get(
    "/recommend",
    response_model=RecommendResponse,
    response_model_exclude_none=True,
    responses=ERRORS,
    dependencies=[Depends(once_each("user_id", "k", "exclude_seen"))],
)
async def recommend_get(
    rec: Rec,
    batch: Batcher,
    user_id: Annotated[
        str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, json_schema_extra=_never_null)
    ] = None,
    items: Annotated[
        list[ItemId] | None, Query(max_length=MAX_HISTORY, json_schema_extra=_never_null)
    ] = None,
    k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
    exclude_seen: bool = True,
) -> RecommendResponse:
    """Top-k items for a user (history from the event store) and/or `items` (repeatable)."""
    query = RecQuery(user_id, tuple(items or ()), k, exclude_seen)
    (result,) = await batch.recommend(rec, [query])
    return response_of(result)


@router.post(
    "/recommend",
    response_model=RecommendResponse,
    response_model_exclude_none=True,
    responses=ERRORS,
)
async def recommend_post(body: RecommendRequest, rec: Rec, batch: Batcher) -> RecommendResponse:
    """Top-k items for a known user and/or an anonymous session's `items`."""
    (result,) = await batch.recommend(rec, [_query(body)])
    return response_of(result)


# JSON Schema cannot bound a sum: a batch whose k sum past the bound is schema-valid, and too
# large an answer to build in one go, which is what 413 says
TOO_MANY_ITEMS: dict[int | str, dict[str, Any]] = {
    413: {
        "model": ErrorResponse,
        "description": f"A body above RECSYS_MAX_BODY_BYTES, or requests whose k sum past "
        f"{MAX_BATCH_ITEMS:,} (split the batch).",
    }
}


@router.post(
    "/recommend/batch",
    response_model=BatchResponse,
    response_model_exclude_none=True,
    responses={**ERRORS, **TOO_MANY_ITEMS},
)
async def recommend_batch(body: BatchRequest, rec: Rec, batch: Batcher) -> BatchResponse:
    """Up to 1,000 /recommend bodies, answered in as few model passes as the batcher allows."""
    if body.total_k > MAX_BATCH_ITEMS:
        raise HTTPException(
            413,
            f"the requests' k sum to {body.total_k}; at most {MAX_BATCH_ITEMS:,} items a "
            "batch (split it)",
        )
    results = await batch.recommend(rec, [_query(r) for r in body.requests])
    return BatchResponse(results=[response_of(r) for r in results], model_version=rec.version)
