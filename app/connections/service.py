"""Connect, heartbeat, disconnect."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import record
from app.auth.profiles import is_permitted, server_resource
from app.auth.roles import PrincipalInfo, Role
from app.connections import exit_urls
from app.connections.models import Connection
from app.connections.schemas import QueueManagerConnect, ServerConnect
from app.db import utcnow
from app.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.policy.active import ActivePolicy

TOKEN_PREFIX = "c_"
_ROLE_FOR = {"queue_manager": Role.QUEUE_MANAGER, "server": Role.SERVER}


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def resolve_node(policy: ActivePolicy, node: str | None, *, required: bool) -> str | None:
    """The node a connection belongs to: as given, or the only node; a server must have one."""
    if node is not None:
        if node not in policy.nodes:
            raise ValidationFailed([{"path": "node", "message": f"unknown node {node!r}; nodes: {', '.join(policy.nodes)}"}])
        return node
    if len(policy.nodes) == 1:
        return policy.nodes[0]
    if required:
        raise ValidationFailed([{"path": "node", "message": f"the policy has several nodes ({', '.join(policy.nodes)}); name one"}])
    return None


async def connect(
    session: AsyncSession,
    principal: PrincipalInfo,
    policy: ActivePolicy,
    request: QueueManagerConnect | ServerConnect,
    exit_url_allowlist: Sequence[str],
) -> tuple[Connection, str]:
    needed = _ROLE_FOR[request.role]
    if needed not in principal.roles:
        raise Forbidden(f"connecting as a {request.role} needs the role {needed}", code="missing_role", required_roles=[needed])
    if isinstance(request, ServerConnect):
        connection = await _server_connection(session, principal, policy, request)
    else:
        connection = _queue_manager_connection(policy, request, exit_url_allowlist)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    connection.token_hash = token_hash(token)
    connection.principal_id = principal.id
    session.add(connection)
    await session.commit()
    await session.refresh(connection, ["principal"])
    return connection, token


def _queue_manager_connection(
    policy: ActivePolicy, request: QueueManagerConnect, exit_url_allowlist: Sequence[str]
) -> Connection:
    exit_url = str(request.exit_url) if request.exit_url is not None else None
    if exit_url is not None and not exit_urls.allowed(exit_url, exit_url_allowlist):
        raise ValidationFailed(
            [{"path": "exit_url", "message": "not in the exit URL allowlist the administrator configured (WLM_EXIT_URL_ALLOWLIST)"}]
        )
    return Connection(
        role="queue_manager",
        subsystem_type=request.subsystem_type,
        subsystem_name=request.subsystem_name,
        node=resolve_node(policy, request.node, required=False),
        exit_url=exit_url,
    )


async def _server_connection(
    session: AsyncSession, principal: PrincipalInfo, policy: ActivePolicy, request: ServerConnect
) -> Connection:
    ae = policy.application_environments.get(request.application_environment)
    if ae is None:
        known = ", ".join(policy.application_environments) or "none"
        raise ValidationFailed(
            [{"path": "application_environment", "message": f"unknown application environment {request.application_environment!r}; defined: {known}"}]
        )
    if ae.subsystem_type != request.subsystem_type:
        raise ValidationFailed(
            [{"path": "subsystem_type", "message": f"{ae.name} serves subsystem type {ae.subsystem_type}, not {request.subsystem_type}"}]
        )
    node = resolve_node(policy, request.node, required=True)
    assert node is not None
    if not policy.hosts(ae.name, node):
        raise ValidationFailed([{"path": "node", "message": f"node {node} does not host {ae.name}"}])

    # The seed's SAF check: a permit on sstype.subsys.applenv[.node]. The node qualifier is only part of the
    # resource when the server named it, as NODENM is optional on IWM4CON.
    resource = server_resource(request.subsystem_type, request.subsystem_name, ae.name, request.node)
    if not is_permitted(principal.permits, resource):
        raise Forbidden(f"{principal.name} has no permit for the server resource {resource}", code="not_permitted", resource=resource)

    # The seed: a server's subsystem type and name must match those of its queue manager's connect.
    queue_managers = await session.scalar(
        select(func.count()).where(
            Connection.role == "queue_manager",
            Connection.state == "active",
            Connection.subsystem_type == request.subsystem_type,
            Connection.subsystem_name == request.subsystem_name,
        )
    )
    if not queue_managers:
        raise Conflict(
            f"no queue manager {request.subsystem_type}/{request.subsystem_name} is connected; servers connect for a connected queue manager",
            code="queue_manager_not_connected",
        )
    return Connection(
        role="server",
        subsystem_type=request.subsystem_type,
        subsystem_name=request.subsystem_name,
        node=node,
        application_environment=ae.name,
        worker_tasks=request.worker_tasks,
        worker_weight=request.worker_weight,
        overflow=request.overflow,
    )


async def by_token(session: AsyncSession, principal: PrincipalInfo, token: str, *, admin_may: bool = False) -> Connection:
    """The caller's own connection by its token. Someone else's token is reported unknown, as a wrong one is."""
    connection = await session.scalar(select(Connection).where(Connection.token_hash == token_hash(token)))
    if connection is None or (connection.principal_id != principal.id and not (admin_may and Role.ADMIN in principal.roles)):
        raise NotFound("unknown connect token", code="unknown_connection")
    return connection


async def heartbeat(session: AsyncSession, principal: PrincipalInfo, token: str) -> Connection:
    connection = await by_token(session, principal, token)
    if connection.state != "active":
        raise Conflict("this connection is disconnected; connect again", code="connection_closed", state=connection.state)
    connection.last_heartbeat_at = utcnow()
    await session.commit()
    return connection


async def disconnect(session: AsyncSession, principal: PrincipalInfo, token: str) -> tuple[Connection, bool]:
    """IWM4DIS. Idempotent: a second call reports the first one's result."""
    connection = await by_token(session, principal, token, admin_may=True)
    if connection.state == "disconnected":
        return connection, True
    connection.state = "disconnected"
    connection.disconnected_at = utcnow()
    if connection.principal_id == principal.id:
        connection.disconnect_reason = "requested"
    else:
        connection.disconnect_reason = "forced"
        record(session, principal.name, "connection.force_disconnect", str(connection.id), role=connection.role)
    await session.commit()
    return connection, False


async def list_connections(
    session: AsyncSession, *, role: str | None, state: str | None, application_environment: str | None, limit: int, offset: int
) -> tuple[list[Connection], int]:
    query = select(Connection)
    for column, value in ((Connection.role, role), (Connection.state, state), (Connection.application_environment, application_environment)):
        if value is not None:
            query = query.where(column == value)
    total = await session.scalar(select(func.count()).select_from(query.subquery()))
    rows = await session.scalars(query.order_by(Connection.id.desc()).limit(limit).offset(offset))
    return list(rows), total or 0
