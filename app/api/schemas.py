"""Request and response bodies of the HTTP API (pydantic; they also make the OpenAPI docs).

Bodies are strict (JSON types only, no coercion of "10" to 10) and forbid unknown fields, so a
typo such as `"item": [...]` is a 422 naming the field instead of being silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

MAX_K = 1000
MAX_HISTORY = 1000
MAX_BATCH = 1000
MAX_ID_LENGTH = 256
MAX_EVENTS = 10_000  # rows per POST /events (RECSYS_MAX_BODY_BYTES bounds the bytes)
MAX_BATCH_ITEMS = 100_000  # the sum of k over a /recommend/batch body: answers built in one go


def _whole_number(value: object) -> object:
    """`value`, a float with no fractional part as its int: JSON Schema's integer has 10.0 too.

    Strict mode refuses every float for an int field, while the published schema (type integer)
    admits 10.0; text and booleans stay refused.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


ItemId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]
K = Annotated[
    int,
    Field(ge=1, le=MAX_K, description=f"Number of items, 1..{MAX_K}."),
    BeforeValidator(_whole_number),  # after the bounds, or the schema loses them
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RecommendRequest(_Body):
    """One recommendation request: a known user, an anonymous session, or both."""

    user_id: ItemId | None = Field(None, description="A user of the event store.")
    items: list[ItemId] = Field(
        default_factory=list,
        max_length=MAX_HISTORY,
        description="History item_ids, oldest first; appended to a known user's history.",
    )
    k: K = 10
    exclude_seen: bool = Field(True, description="Leave out items of the history.")


class BatchRequest(_Body):
    """Several /recommend bodies answered together (their k summing to at most 100,000)."""

    requests: list[RecommendRequest] = Field(min_length=1, max_length=MAX_BATCH)

    @property
    def total_k(self) -> int:
        """The items the answer would hold: the requests' k summed."""
        return sum(r.k for r in self.requests)


class Item(BaseModel):
    """A recommended item: score h . c (|h . c| for absolute-softmax models; popular: count)."""

    item_id: str
    score: float
    title: str | None = None


class RecommendResponse(BaseModel):
    """Top-k items for one request."""

    items: list[Item]
    model_version: str
    strategy: Literal["model", "popular"]
    warnings: list[str]


class BatchResponse(BaseModel):
    """One RecommendResponse per request, in order."""

    results: list[RecommendResponse]
    model_version: str


class SimilarResponse(BaseModel):
    """Nearest items to one item."""

    item_id: str
    items: list[Item]
    model_version: str


class ItemResponse(BaseModel):
    """Metadata of one item in the served model."""

    item_id: str
    title: str | None = None
    popularity: int
    model_version: str


class Health(BaseModel):
    """Liveness answer: the process is up, and which release of recsys it runs."""

    status: Literal["ok"]
    version: str = Field(description="The installed recsys package's version.")


class Status(BaseModel):
    """Readiness answer: what is served, published and failed (fields absent when unknown)."""

    status: str
    model_version: str | None = Field(None, description="The version answering requests.")
    published_version: str | None = Field(
        None, description="The version models/CURRENT names (differs after a failed reload)."
    )
    index: dict[str, int | float | str] | None = None
    detail: str | None = None
    last_reload_error: str | None = Field(
        None, description="Why the last reload failed; absent once a reload succeeds."
    )
    last_reload_error_at: str | None = Field(None, description="When it failed (ISO 8601, UTC).")
    failed_reloads: int | None = Field(None, description="Failed reloads since the start.")


class ReloadResponse(BaseModel):
    """What POST /admin/reload did."""

    changed: bool
    model_version: str | None
    previous: str | None
    seconds: float


def _one_timestamp_error(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """One error for the field, not one per member of the union (`timestamp.int`, `.str`)."""
    try:
        return _unicode(handler(_whole_number(value)))
    except ValidationError:
        raise PydanticCustomError(
            "timestamp_type", "Input should be an integer (Unix seconds), a string or null"
        ) from None


def _unicode(value: object) -> object:
    """`value`; a str holding a lone surrogate (one with no UTF-8 form) is refused."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise PydanticCustomError(
                "string_unicode", "Input should be valid Unicode text (a lone surrogate is not)"
            ) from None
    return value


EventText = Annotated[str | None, AfterValidator(_unicode)]


Timestamp = Annotated[
    int | str | None,
    WrapValidator(_one_timestamp_error),
    Field(description="Unix seconds (integer) or ISO-8601 text (naive times are UTC)."),
]


class Event(_Body):
    """One interaction, as in a log file.

    Every key is required; a null or otherwise invalid value rejects this row only, with the
    reason a file ingest gives (ids are stripped of outer spaces and at most 256 characters).
    """

    user_id: EventText
    item_id: EventText
    timestamp: Timestamp


class EventsRequest(_Body):
    """A batch of events to append to the event store as one part."""

    events: list[Event] = Field(min_length=1, max_length=MAX_EVENTS)


class RejectedEvent(BaseModel):
    """A refused row: its position in `events`, its values as sent, and why."""

    index: int
    user_id: str | None
    item_id: str | None
    timestamp: int | str | None
    reason: str


class EventsResponse(BaseModel):
    """What POST /events stored: accepted + rejected == rows sent."""

    ingest_id: str = Field(description="Names the part, events/part-<ingest_id>.parquet.")
    accepted: int
    rejected: int
    rejects: list[RejectedEvent]
    events_total: int = Field(description="Events in the store after this batch.")


class ErrorResponse(BaseModel):
    """Every error: a message naming what is wrong (and, for 422, each failing field)."""

    detail: str
    errors: list[dict[str, str]] | None = None
