from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel

from app.auth.roles import Role
from app.deps import check_roles, principal_of
from app.http import HotPath
from app.state import AppState
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
)
from app.work.service import Work

router = APIRouter(tags=["work"])

ConnectTokenQuery = Annotated[str, Query(min_length=1, max_length=128, description="the caller's connect token")]
REPLAYED_HEADER = "Idempotent-Replayed"


def _work_for(role: Role) -> Callable[..., Coroutine[Any, Any, Work]]:
    allowed = frozenset({role})

    async def work(request: Request) -> Work:  # one dependency, no nested ones: these routes are the hot path
        principal = check_roles(await principal_of(request), allowed)
        state: AppState = request.app.state.wlm
        return Work(state.sessions, state.connection_cache, state.operator, state.queues, state.policies, state.dispatcher, state.router, state.settings, principal)

    return work


# The lifecycle operations of the caller, checked for the role the route needs (one dependency, one check).
queue_manager_work = _work_for(Role.QUEUE_MANAGER)
server_work = _work_for(Role.SERVER)
QueueManagerWork = Annotated[Work, Depends(queue_manager_work)]
ServerWork = Annotated[Work, Depends(server_work)]


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """The hot routes serialize once, with pydantic's serializer, instead of FastAPI validating the response again."""
    return Response(model.__pydantic_serializer__.to_json(model), status_code=status, media_type="application/json", headers=headers)


@router.post("/v1/enclaves", status_code=201, response_model=EnclaveOut, summary="IWM4ECRE: classify and create an enclave")
async def create_enclave(body: EnclaveIn, work: QueueManagerWork) -> EnclaveOut:
    return await work.create_enclave(body)


@router.delete("/v1/enclaves/{token}", status_code=204, summary="Delete an enclave")
async def delete_enclave(token: str, connect_token: ConnectTokenQuery, work: QueueManagerWork) -> Response:
    await work.delete_enclave(token, connect_token)
    return Response(status_code=204)


@router.post("/v1/work", status_code=201, response_model=WorkQueued, summary="IWM4QIN: queue a work request")
async def insert(body: WorkIn, work: QueueManagerWork) -> Response:
    queued, replayed = await work.insert(body)
    return _json(queued, 201, {REPLAYED_HEADER: "true"} if replayed else None)


@router.post(
    "/v1/work:batch", status_code=201, response_model=WorkBatchQueued, summary="IWM4QIN for many requests of one environment, all or none"
)
async def insert_batch(body: WorkBatchIn, work: QueueManagerWork) -> Response:
    queued, _replayed = await work.insert_batch(body)
    return _json(WorkBatchQueued(items=queued), 201)


@router.post(
    "/v1/work/select",
    response_model=SelectOut,
    responses={204: {"description": "no work came within wait_seconds"}},
    summary="IWM4SSL: select work (long poll), optionally ending earlier requests first",
)
async def select(body: SelectIn, work: ServerWork) -> Response:
    result = await work.select(body)
    return Response(status_code=204) if result is None else _json(result)


@router.post("/v1/work/{token}/begin", response_model=BegunOut, summary="IWM4STBG: begin a selected request")
async def begin(token: str, body: TokenOnly, work: ServerWork) -> BegunOut:
    token, lease_expires_at = await work.begin(token, body.connect_token)
    return BegunOut(token=token, state="begun", lease_expires_at=lease_expires_at)


@router.post("/v1/work/{token}/end", response_model=EndedOut, summary="IWM4STEN: end a request")
async def end(token: str, body: EndRequest, work: ServerWork) -> Response:
    return _json(await work.end(token, body.connect_token, body.outcome, body.result))


@router.delete("/v1/work/{token}", response_model=DeletedOut, summary="IWM4QDE: delete a request still queued")
async def delete(token: str, connect_token: ConnectTokenQuery, work: QueueManagerWork) -> DeletedOut:
    await work.delete(token, connect_token)
    return DeletedOut(token=token, outcome="deleted")


# The calls of every request's life (a queue manager's insert, single or batched; a server's select) take the
# fast path.
HOT_PATHS = (
    HotPath("POST", "/v1/work", WorkIn, queue_manager_work, insert),
    HotPath("POST", "/v1/work:batch", WorkBatchIn, queue_manager_work, insert_batch),
    HotPath("POST", "/v1/work/select", SelectIn, server_work, select),
)
