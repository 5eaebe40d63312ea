from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from app.shared.schemas import IsoDateTime, Name, StrictModel

Reason = Literal["max_deliveries", "failed"]


class DeadLetterFilter(StrictModel):
    """Which dead letters: every field given must match (none given matches every dead letter, which a bulk
    retry or discard takes only with `all`)."""

    application_environment: Name | None = None
    node: Name | None = None
    service_class: Name | None = None
    reason: Reason | None = None
    # A `since` after `until` matches none, as any two filters that no dead letter meets: a schema cannot say that one
    # field must come before another, so the service does not refuse it either.
    since: IsoDateTime | None = Field(default=None, description="died at or after")
    until: IsoDateTime | None = Field(default=None, description="died at or before")

    def narrows(self) -> bool:
        return any(getattr(self, name) is not None for name in DeadLetterFilter.model_fields)


# A page's next_cursor: where the dead letter after it died (ms) and its token (node~environment~id).
CURSOR = r"^[0-9]{1,18}_[^~]+~[^~]+~[^~]+$"


class DeadLetterQuery(DeadLetterFilter):
    limit: int = Field(default=100, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=400, pattern=CURSOR, description="next_cursor of the page before")


class RetryIn(StrictModel):
    position: Literal["front", "back"] = Field(default="back", description="queued ahead of its class's work, or behind it")


def _filter_or_all(schema: dict[str, Any]) -> None:
    """Declares `_deliberate`'s rule, so that a generated client knows it: some filter field given (not null), or
    `all: true`."""
    given = [{"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in DeadLetterFilter.model_fields]
    schema["anyOf"] = [*given, {"required": ["all"], "properties": {"all": {"const": True}}}]


class BulkIn(DeadLetterFilter):
    model_config = ConfigDict(json_schema_extra=_filter_or_all)

    all: StrictBool = Field(default=False, description="must be true to act on every dead letter (no filter given)")

    @model_validator(mode="after")
    def _deliberate(self) -> BulkIn:
        if not self.all and not self.narrows():
            raise ValueError("give a filter, or all: true to act on every dead letter")
        return self


class BulkRetryIn(BulkIn, RetryIn):
    pass


class DeadLetterOut(BaseModel):
    token: str
    application_environment: str
    node: str
    service_class: str
    report_class: str | None
    dependent: bool
    reason: Reason
    deliveries: int
    last_server_id: int | None
    error: str | None = Field(description="the error text its server sent with its last end, if any")
    userid: str | None
    queue_manager_id: int
    life: int = Field(description="1 for a request's first life; each retry lives again under the same token")
    inserted_at: datetime = Field(description="when this life was queued")
    first_inserted_at: datetime = Field(description="when its first life was queued")
    selected_at: datetime | None
    died_at: datetime
    payload: Any = Field(default=None, description="in GET /v1/dead-letters/{token} only")


class DeadLetterList(BaseModel):
    items: list[DeadLetterOut]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null when there is none")


class RetriedOut(BaseModel):
    token: str
    service_class: str
    position: Literal["front", "back"]
    life: int


class BulkOut(BaseModel):
    matched: int = Field(description="dead letters that matched the filter")
    done: int = Field(description="of them, retried or discarded by this call (the others were by another meanwhile)")
    tokens: list[str]
