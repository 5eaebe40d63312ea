"""Connect, look up, heartbeat (disconnecting is app.connections.departures)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.profiles import is_permitted, server_resource
from app.auth.roles import PrincipalInfo, Role
from app.connections import exit_urls
from app.connections.models import Connection
from app.connections.records import ConnectionRecords
from app.connections.schemas import QueueManagerConnect, ServerConnect
from app.db import utcnow
from app.errors import Conflict, Forbidden, NotFound
from app.policy.active import ActivePolicy
from app.queues.store import QueueStore
from app.shared.ttl_cache import TtlCache

TOKEN_PREFIX = "c_"
_ROLE_FOR = {"queue_manager": Role.QUEUE_MANAGER, "server": Role.SERVER}


@dataclass(frozen=True, slots=True)
class ConnInfo:
    """An active connection as the hot paths need it; cached in Redis under its token hash."""

    id: int
    principal_id: int
    role: str
    subsystem_type: str
    subsystem_name: str
    node: str | None
    application_environment: str | None
    worker_tasks: int | None
    worker_weight: int | None
    overflow: bool
    exit_url: str | None
    connected_at: float = 0.0  # epoch seconds (a default: records cached before it existed still load)

    @classmethod
    def of(cls, connection: Connection) -> ConnInfo:
        fields = {f: getattr(connection, f) for f in cls.__dataclass_fields__ if f != "connected_at"}
        return cls(**fields, connected_at=connection.connected_at.timestamp())


async def _publish(store: QueueStore, connection: Connection) -> ConnInfo:
    """Make an active connection visible to every replica: its record, and a server's registration with the
    queues of its environment (capacity and weight for select)."""
    info = ConnInfo.of(connection)
    await ConnectionRecords(store.context).save(connection.token_hash, asdict(info))
    if info.role == "server":
        assert info.node and info.application_environment and info.worker_tasks and info.worker_weight
        k = store.keys(info.node, info.application_environment)
        await store.register_server(k, info.id, info.worker_tasks, info.worker_weight, info.overflow)
    return info


ConnectionCache = TtlCache[ConnInfo]


async def active_connection(
    sessions: async_sessionmaker[AsyncSession], store: QueueStore, cache: ConnectionCache, principal: PrincipalInfo, token: str, role: str
) -> ConnInfo:
    """The caller's active connection of `role` by its token: from this process's cache, else one Redis read;
    the database (the system of record, in a short session) answers when Redis has lost the record, and the
    record is restored. A copy cached here may outlive a disconnect on another process for the cache's time:
    the queue scripts refuse a server that is no longer registered, and a queue manager's queues are purged
    a second time after that time (`purge_departed_again`)."""
    hashed = token_hash(token)
    info = await cache.get_or_load(hashed, lambda: _lookup_connection(sessions, store, hashed))
    if info.principal_id != principal.id:
        raise NotFound("unknown or disconnected connect token", code="unknown_connection")
    if info.role != role:
        raise Conflict(f"this call needs a {role} connection, not a {info.role} one", code="wrong_connection_role")
    return info


async def _lookup_connection(sessions: async_sessionmaker[AsyncSession], store: QueueStore, hashed: str) -> ConnInfo:
    record = await ConnectionRecords(store.context).get(hashed)
    if record is not None:
        return ConnInfo(**record)
    async with sessions() as session:
        connection = await session.scalar(select(Connection).where(Connection.token_hash == hashed))
    if connection is None or connection.state != "active":
        raise NotFound("unknown or disconnected connect token", code="unknown_connection")
    return await _publish(store, connection)


async def principal_of_connection(sessions: async_sessionmaker[AsyncSession], connection_id: int) -> int | None:
    """The principal a connection belongs to, active or closed (None: no such connection)."""
    async with sessions() as session:
        return await session.scalar(select(Connection.principal_id).where(Connection.id == connection_id))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def resolve_node(policy: ActivePolicy, node: str | None, *, required: bool) -> str | None:
    """The node a connection belongs to: as given, or the only node; a server must have one."""
    if node is not None:
        if node not in policy.nodes:
            raise NotFound(f"unknown node {node!r}; nodes: {', '.join(policy.nodes)}", code="unknown_node", node=node)
        return node
    if len(policy.nodes) == 1:
        return policy.nodes[0]
    if required:
        raise Conflict(f"the policy has several nodes ({', '.join(policy.nodes)}); name one", code="node_required")
    return None


async def connect(
    session: AsyncSession,
    store: QueueStore,
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
    await _publish(store, connection)
    return connection, token


def _queue_manager_connection(policy: ActivePolicy, request: QueueManagerConnect, exit_url_allowlist: Sequence[str]) -> Connection:
    exit_url = str(request.exit_url) if request.exit_url is not None else None
    if exit_url is not None and not exit_urls.allowed(exit_url, exit_url_allowlist):
        # The administrator's permission for a resource, as a server's permit is: refused with 403, like a permit.
        raise Forbidden(
            "exit_url is not in the exit URL allowlist the administrator configured (WLM_EXIT_URL_ALLOWLIST)", code="exit_url_not_allowed"
        )
    return Connection(
        role="queue_manager",
        subsystem_type=request.subsystem_type,
        subsystem_name=request.subsystem_name,
        node=resolve_node(policy, request.node, required=False),
        exit_url=exit_url,
        exit_secret=secrets.token_hex(32) if exit_url else None,
    )


async def _server_connection(session: AsyncSession, principal: PrincipalInfo, policy: ActivePolicy, request: ServerConnect) -> Connection:
    ae = policy.environment(request.application_environment)
    if ae.subsystem_type != request.subsystem_type:
        raise Conflict(f"{ae.name} serves subsystem type {ae.subsystem_type}, not {request.subsystem_type}", code="wrong_subsystem_type")
    node = resolve_node(policy, request.node, required=True)
    assert node is not None
    if not policy.hosts(ae.name, node):
        raise Conflict(f"node {node} does not host {ae.name}", code="not_hosted", node=node, application_environment=ae.name)

    # z/OS WLM's SAF check on a server's connect: a permit on sstype.subsys.applenv[.node]. The node qualifier is only part of the
    # resource when the server named it, as NODENM is optional on IWM4CON.
    resource = server_resource(request.subsystem_type, request.subsystem_name, ae.name, request.node)
    if not is_permitted(principal.permits, resource):
        raise Forbidden(f"{principal.name} has no permit for the server resource {resource}", code="not_permitted", resource=resource)

    # As in z/OS WLM, a server's subsystem type and name must match those of its queue manager's connect; a dynamic
    # environment is in the scope of the one queue manager that defined it.
    owner = policy.dynamic.get(ae.name)
    if owner is not None and owner.subsystem_name != request.subsystem_name:
        raise Forbidden(
            f"{ae.name} is a dynamic application environment of queue manager {ae.subsystem_type}/{owner.subsystem_name}",
            code="outside_scope",
        )
    queue_managers = await session.scalar(
        select(func.count()).where(
            Connection.role == "queue_manager",
            Connection.state == "active",
            Connection.subsystem_type == request.subsystem_type,
            Connection.subsystem_name == request.subsystem_name,
            *([Connection.id == owner.queue_manager_id] if owner is not None else []),
        )
    )
    if not queue_managers:
        raise Conflict(
            f"no queue manager {request.subsystem_type}/{request.subsystem_name} "
            "is connected; servers connect for a connected queue manager",
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
        instance=request.instance,
    )


async def by_token(session: AsyncSession, principal: PrincipalInfo, token: str, *, admin_may: bool = False) -> Connection:
    """The caller's own connection by its token. Someone else's token is reported unknown, as a wrong one is."""
    connection = await session.scalar(select(Connection).where(Connection.token_hash == token_hash(token)))
    if connection is None or (connection.principal_id != principal.id and not (admin_may and Role.ADMIN in principal.roles)):
        raise NotFound("unknown connect token", code="unknown_connection")
    return connection


async def heartbeat(
    session: AsyncSession, store: QueueStore, policy: ActivePolicy | None, principal: PrincipalInfo, token: str
) -> tuple[Connection, int]:
    """Liveness; a server's heartbeat also restarts the completion time of every request it holds.
    Returns the connection and how many leases were extended."""
    connection = await by_token(session, principal, token)
    if connection.state != "active":
        raise Conflict("this connection is disconnected; connect again", code="connection_closed", state=connection.state)
    connection.last_heartbeat_at = utcnow()
    await session.commit()
    ae = connection.application_environment
    config = policy.queue_config(ae) if policy and ae else None
    if config is None or ae is None or connection.node is None:
        return connection, 0
    keys = store.keys(connection.node, ae)
    return connection, await store.extend(keys, config, connection.id)


async def list_connections(
    session: AsyncSession, *, role: str | None, state: str | None, application_environment: str | None, limit: int, offset: int
) -> tuple[list[Connection], int]:
    query = select(Connection)
    for column, value in (
        (Connection.role, role),
        (Connection.state, state),
        (Connection.application_environment, application_environment),
    ):
        if value is not None:
            query = query.where(column == value)
    total = await session.scalar(select(func.count()).select_from(query.subquery()))
    rows = await session.scalars(query.order_by(Connection.id.desc()).limit(limit).offset(offset))
    return list(rows), total or 0
