from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query

from app.connections import departures, service
from app.connections.schemas import (
    ConnectIn,
    ConnectionCreated,
    ConnectionList,
    ConnectionOut,
    DisconnectOut,
    HeartbeatOut,
    ServerConnect,
)
from app.deps import Connector, Offset, Participant, SessionDep, StateDep, Viewer

router = APIRouter(prefix="/v1/connections", tags=["connections"])


@router.post(
    "",
    status_code=201,
    response_model=ConnectionCreated,
    summary="IWM4CON: connect a queue manager or a server",
    # What the schema cannot state: it depends on the active policy, the connected queue managers and the allowlist.
    description=(
        "A server's application environment and node must be the active policy's: an unknown one is 404 "
        "(`unknown_application_environment`, `unknown_node`); one that does not fit the policy is 409 "
        "(`wrong_subsystem_type`, `not_hosted`, `node_required` when the policy has several nodes and none is named), "
        "as is a server whose queue manager is not connected (`queue_manager_not_connected`). A queue manager's "
        "`exit_url` outside the administrator's allowlist is 403 `exit_url_not_allowed`, as a server resource without a "
        "permit is 403 `not_permitted`."
    ),
)
async def connect(body: Annotated[ConnectIn, Body()], session: SessionDep, state: StateDep, principal: Connector) -> ConnectionCreated:
    # A server may connect for a dynamic environment its queue manager has just defined on another replica.
    policy = await (state.policies.knowing(body.application_environment) if isinstance(body, ServerConnect) else state.policies.active())
    connection, token = await service.connect(session, state.queues, principal, policy, body, state.settings.exit_url_allowlist)
    return ConnectionCreated(
        **ConnectionOut.model_validate(connection).model_dump(),
        token=token,
        exit_secret=connection.exit_secret,
        heartbeat_interval_s=state.settings.heartbeat_interval_seconds,
        heartbeat_timeout_s=state.settings.heartbeat_timeout_seconds,
    )


@router.get("", response_model=ConnectionList, summary="Connections, newest first")
async def list_connections(
    session: SessionDep,
    _: Viewer,
    role: Literal["queue_manager", "server"] | None = None,
    state: Literal["active", "disconnected"] | None = None,
    application_environment: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> ConnectionList:
    rows, total = await service.list_connections(
        session,
        role=role,
        state=state,
        application_environment=application_environment.upper() if application_environment else None,
        limit=limit,
        offset=offset,
    )
    return ConnectionList(items=[ConnectionOut.model_validate(r) for r in rows], total=total, limit=limit, offset=offset)


@router.post("/{token}/heartbeat", response_model=HeartbeatOut, summary="Liveness of a connection")
async def heartbeat(token: str, session: SessionDep, state: StateDep, principal: Connector) -> HeartbeatOut:
    policy = await state.policies.current()
    connection, extended = await service.heartbeat(session, state.queues, policy, principal, token)
    return HeartbeatOut(
        id=connection.id,
        state=connection.state,
        last_heartbeat_at=connection.last_heartbeat_at,
        heartbeat_interval_s=state.settings.heartbeat_interval_seconds,
        leases_extended=extended,
    )


@router.delete("/{token}", response_model=DisconnectOut, summary="IWM4DIS: disconnect")
async def disconnect(token: str, session: SessionDep, state: StateDep, principal: Participant) -> DisconnectOut:
    policy = await state.policies.current()
    connection, already, cleanup = await departures.disconnect(
        session,
        state.queues,
        state.connection_cache,
        state.operator,
        policy,
        principal,
        token,
        purge_again_after_s=2 * state.settings.connection_cache_seconds + 1,
    )
    assert connection.disconnected_at is not None
    if cleanup.removed_environments:
        state.policies.invalidate()
    return DisconnectOut(
        id=connection.id,
        state=connection.state,
        disconnected_at=connection.disconnected_at,
        already_disconnected=already,
        purged=cleanup.purged,
        requeued=cleanup.requeued,
        abandoned=cleanup.abandoned,
        removed_application_environments=list(cleanup.removed_environments),
    )
