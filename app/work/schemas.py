from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

from app.policy.schemas import Attributes
from app.servers.delays import DelayCause
from app.shared.schemas import INTEGRAL, JsonDocument, Name, StrictModel

ConnectToken = Annotated[str, StringConstraints(min_length=1, max_length=128)]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")]
Userid = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[^\x00]*$")]
# A work request's body is bounded on the wire, where its payload may take WIRE_PAYLOAD_FACTOR times the bytes that
# max_payload_bytes counts (the payload as stored: compact UTF-8): a client that escapes non-ASCII text sends "\u65e5"
# for a 3-byte character, and two such escapes for a 4-byte one. Its other fields take at most WORK_FIELDS_BYTES:
# tokens, names, a userid and key (under 1 KiB) and a classification (17 qualifiers of 64 + 256 characters: under
# 6 KiB, or three times that escaped).
WIRE_PAYLOAD_FACTOR = 3
ERROR_TEXT_CHARS = 2_048
WORK_FIELDS_BYTES = 24_576


class EnclaveIn(StrictModel):
    connect_token: ConnectToken
    # Work qualifiers by API name (transaction_name, userid, transaction_class, subsystem_instance, ...) or
    # by WLM qualifier (TN, UI, TC, SI, ...). Ignored for a dependent enclave.
    classification: Attributes = Field(default_factory=dict)
    # A dependent enclave continues the parent's transaction and keeps its classes.
    parent: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None


class EnclaveOut(BaseModel):
    token: str
    service_class: str
    report_class: str | None
    dependent: bool
    policy_version: int
    expires_at: datetime


class WorkItemIn(StrictModel):
    """One request. Its classes come from `enclave_token` (IWM4ECRE first) or, to save that call, from
    `classification` (an independent enclave is implied)."""

    enclave_token: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    classification: Attributes | None = None
    payload: JsonDocument = None
    userid: Userid | None = None
    idempotency_key: IdempotencyKey | None = None


class WorkIn(WorkItemIn):
    connect_token: ConnectToken
    application_environment: Name
    node: Name | None = None


class WorkBatchIn(StrictModel):
    connect_token: ConnectToken
    application_environment: Name
    node: Name | None = None
    items: list[WorkItemIn] = Field(min_length=1)


# The answers of the lifecycle's calls are plain dataclasses: built for each request (hundreds per batch), where a
# pydantic model's construction cost more than the rest of the answer; the routes write them with orjson
# (tests/work/test_answers_json.py holds that to pydantic's serialization of the same types, which the API documents).


@dataclass(slots=True)
class WorkQueued:
    token: str
    application_environment: str
    node: str
    service_class: str
    report_class: str | None


@dataclass(slots=True)
class WorkBatchQueued:
    items: list[WorkQueued]


class EndIn(StrictModel):
    # What _only_failed_dies checks, in the schema's words.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"dead_letter": {"const": True}}, "required": ["dead_letter"]},
            "then": {"properties": {"outcome": {"const": "failed"}}, "required": ["outcome"]},
        }
    )

    outcome: Literal["completed", "failed"] = "completed"
    # A small result (JSON), kept in this request's work record (`result`).
    result: JsonDocument = None
    # Why it failed, kept with its dead letter.
    error: Annotated[str, StringConstraints(max_length=ERROR_TEXT_CHARS)] | None = None
    # A failed request that should not be tried again goes to its environment's dead letters (GET /v1/dead-letters).
    dead_letter: StrictBool = False

    @model_validator(mode="after")
    def _only_failed_dies(self) -> EndIn:
        if self.dead_letter and self.outcome != "failed":
            raise ValueError("dead_letter needs outcome 'failed'")
        return self


class EndRequest(EndIn):
    connect_token: ConnectToken


class EndInSelect(EndIn):
    token: Annotated[str, StringConstraints(min_length=1, max_length=256)]


class SelectIn(StrictModel):
    connect_token: ConnectToken
    wait_seconds: float = Field(default=0, strict=True, ge=0, le=60, description="long poll: wait up to this long for work")
    max_items: Annotated[int, Field(strict=True, ge=1, le=1000, description="take up to this many, within free worker tasks"), INTEGRAL] = 1
    # Begin the selected requests at once (IWM4STBG), saving a call per request.
    begin: StrictBool = False
    # End requests first (IWM4STEN), then select: one round trip for a server's loop.
    end: list[EndInSelect] = Field(default_factory=list, max_length=1000)


@dataclass(slots=True)
class WorkItemOut:
    token: str
    service_class: str
    report_class: str | None
    payload: Any  # as the answer carries it: the JSON text stored at the insert, as an orjson.Fragment
    userid: str | None
    enclave: str | None
    state: Literal["selected", "begun"]
    deliveries: int
    inserted_at: datetime
    lease_expires_at: datetime


@dataclass(slots=True)
class EndedOut:
    token: str
    outcome: str
    response_time_ms: int


@dataclass(slots=True)
class EndErrorOut:
    """An end of the select's `end` list that did not apply (e.g. `not_holder`: its lease expired and it went to
    another server; `already_ended`); the other ends and the select went ahead."""

    token: str
    code: str
    message: str


@dataclass(slots=True)
class SelectOut:
    items: list[WorkItemOut]
    ended: list[EndedOut] = field(default_factory=list)
    end_errors: list[EndErrorOut] = field(default_factory=list)
    # IWM4SSL's terminate: the server is no longer needed; it ends what it holds, disconnects and stops.
    terminate: bool = False
    reason_code: str | None = None
    reason: str | None = None


class TokenOnly(StrictModel):
    connect_token: ConnectToken


class BegunOut(BaseModel):
    token: str
    state: Literal["begun"]
    lease_expires_at: datetime


class DeletedOut(BaseModel):
    token: str
    outcome: Literal["deleted"]


WorkState = Literal["queued", "selected", "begun", "ended", "deleted", "dead"]


class WorkStatusOut(BaseModel):
    """A request's own status (GET /v1/work/{token}), for the principal whose connection queued it or an operator."""

    token: str
    state: WorkState = Field(
        description="queued (in memory, or swept to the database), selected, begun; ended or deleted while its tombstone "
        "lives (WLM_TOMBSTONE_SECONDS; then it is unknown); dead: in its environment's dead letters"
    )
    outcome: str | None = Field(
        default=None, description="once ended: completed, failed or abandoned (also of a dead letter); deleted or purged (state deleted)"
    )
    application_environment: str
    node: str
    service_class: str | None = Field(default=None, description="null once ended or deleted: its tombstone keeps only the outcome")
    period: int | None = Field(default=None, description="the period of its service class it is in now (1-based), or was in when it died")
    deliveries: int | None = Field(default=None, description="how often a server selected it (this life, for a dead letter retried)")
    inserted_at: datetime | None = Field(default=None, description="when it was queued (again, for a dead letter retried)")
    position: int | None = Field(
        default=None,
        description="while queued: how many requests of its class queue are ahead of it (0: it is next); its class's "
        "dependent requests come before independent ones. Null when not known: a request queued by an older version "
        "is ahead of it, or a run of more than 32 deleted requests is at its queue's head until a select drops them",
    )
    expected_wait_ms: int | None = Field(
        default=None,
        description="while queued: how long until it is expected to be selected, from its position, its class's recent "
        "execution time and the servers wanted; null without a basis (nothing of its class ended in the last window, "
        "no server connected, its environment's state or its resource group holds it back)",
    )
    expected_start_at: datetime | None = Field(default=None, description="while queued: when it is expected to be selected")
    delay_cause: DelayCause | None = Field(
        default=None,
        description="while queued: why it waits, the first that applies of environment_state (quiesced, stopped, "
        "refreshing), redelivery (given back after a failed delivery), group_cap (its resource group at its cap), "
        "no_server (no server of its environment connected), servers_starting (wanted servers not yet connected), "
        "busy_higher (every worker task taken, some by work of equal or higher importance), busy_lower (every task "
        "taken by less important work); null when a worker task is free",
    )
