from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Path, Query, Response

from app.deps import AnyWork, QueueManagerWork, ServerWork, queue_manager_work, server_work
from app.web.guards import HotPath
from app.work.schemas import (
    BegunOut,
    DeletedOut,
    EnclaveIn,
    EnclaveOut,
    EndedOut,
    EndRequest,
    SelectIn,
    SelectOut,
    TokenOnly,
    WorkBatchIn,
    WorkBatchQueued,
    WorkIn,
    WorkQueued,
    WorkStatusOut,
)

router = APIRouter(tags=["work"])

ConnectTokenQuery = Annotated[str, Query(min_length=1, max_length=128, description="the caller's connect token")]
REPLAYED_HEADER = "Idempotent-Replayed"


def _json(
    answer: WorkQueued | WorkBatchQueued | SelectOut | EndedOut, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """The lifecycle's answers (dataclasses, app/work/schemas.py) written once, by orjson: times as pydantic writes
    them (UTC as Z), a selected payload as the JSON text it was stored as."""
    return Response(orjson.dumps(answer, option=orjson.OPT_UTC_Z), status_code=status, media_type="application/json", headers=headers)


@router.post("/v1/enclaves", status_code=201, response_model=EnclaveOut, summary="IWM4ECRE: classify and create an enclave")
async def create_enclave(body: EnclaveIn, call: QueueManagerWork) -> EnclaveOut:
    return await call.work.enclaves.create(call.principal, body)


@router.delete("/v1/enclaves/{token}", status_code=204, summary="Delete an enclave")
async def delete_enclave(token: str, connect_token: ConnectTokenQuery, call: QueueManagerWork) -> Response:
    await call.work.enclaves.delete(call.principal, token, connect_token)
    return Response(status_code=204)


# What the schema cannot state, since it depends on the active policy (docs/architecture.md, "What the schema cannot
# state"): declared here so a client knows the answer.
_INSERT_RULES = (
    "An application environment the active policy does not define is 404 `unknown_application_environment`; one of "
    "another subsystem type than the queue manager's, or a `node` that does not host it, is 409 (`wrong_subsystem_type`, "
    "`not_hosted`). Repeated `idempotency_key`s within one call are 422 `validation_failed`."
)


@router.post("/v1/work", status_code=201, response_model=WorkQueued, summary="IWM4QIN: queue a work request", description=_INSERT_RULES)
async def insert(body: WorkIn, call: QueueManagerWork) -> Response:
    queued, replayed = await call.work.insertion.insert(call.principal, body)
    return _json(queued, 201, {REPLAYED_HEADER: "true"} if replayed else None)


@router.post(
    "/v1/work:batch",
    status_code=201,
    response_model=WorkBatchQueued,
    summary="IWM4QIN for many requests of one environment, all or none",
    description=_INSERT_RULES,
)
async def insert_batch(body: WorkBatchIn, call: QueueManagerWork) -> Response:
    queued, _replayed = await call.work.insertion.insert_batch(call.principal, body)
    return _json(WorkBatchQueued(items=queued), 201)


@router.post(
    "/v1/work/select",
    response_model=SelectOut,
    responses={204: {"description": "no work came within wait_seconds"}},
    summary="IWM4SSL: select work (long poll), optionally ending earlier requests first",
)
async def select(body: SelectIn, call: ServerWork) -> Response:
    result = await call.work.selection.select(call.principal, body)
    return Response(status_code=204) if result is None else _json(result)


@router.post("/v1/work/{token}/begin", response_model=BegunOut, summary="IWM4STBG: begin a selected request")
async def begin(token: str, body: TokenOnly, call: ServerWork) -> BegunOut:
    token, lease_expires_at = await call.work.ending.begin(call.principal, token, body.connect_token)
    return BegunOut(token=token, state="begun", lease_expires_at=lease_expires_at)


@router.post("/v1/work/{token}/end", response_model=EndedOut, summary="IWM4STEN: end a request")
async def end(token: str, body: EndRequest, call: ServerWork) -> Response:
    return _json(await call.work.ending.end(call.principal, token, body.connect_token, body))


@router.get(
    "/v1/work/{token}",
    response_model=WorkStatusOut,
    summary="A request's own status: state, class, period, position in its queue, expected start, delay cause",
    description="For the principal whose connection queued the request, or an operator; anyone else, and a request "
    "whose tombstone has expired, is answered 404 unknown_work.",
)
async def status(token: Annotated[str, Path(max_length=256)], call: AnyWork) -> WorkStatusOut:
    return await call.work.status.status(call.principal, token)


@router.delete("/v1/work/{token}", response_model=DeletedOut, summary="IWM4QDE: delete a request still queued")
async def delete(token: str, connect_token: ConnectTokenQuery, call: QueueManagerWork) -> DeletedOut:
    await call.work.ending.delete(call.principal, token, connect_token)
    return DeletedOut(token=token, outcome="deleted")


# The calls of every request's life (a queue manager's insert, single or batched; a server's select) take the
# fast path.
HOT_PATHS = (
    HotPath("POST", "/v1/work", WorkIn, queue_manager_work, insert),
    HotPath("POST", "/v1/work:batch", WorkBatchIn, queue_manager_work, insert_batch),
    HotPath("POST", "/v1/work/select", SelectIn, server_work, select),
)
