"""Connect, heartbeat, disconnect."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import record
from app.auth.profiles import is_permitted, server_resource
from app.auth.roles import PrincipalInfo, Role
from app.connections import exit_urls
from app.connections.models import Connection
from app.connections.schemas import QueueManagerConnect, ServerConnect
from app.db import utcnow
from app.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.operator.models import ApplicationEnvironmentState
from app.policy.active import ActivePolicy
from app.policy.models import DynamicApplicationEnvironment
from app.policy.schemas import EnvironmentSettings
from app.queues.keys import AeKeys, connection_key, departed_key
from app.queues.store import AeConfig, QueueStore
from app.ttl_cache import TtlCache

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
    await store.redis.set(connection_key(store.prefix, connection.token_hash), json.dumps(asdict(info)))
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
    raw = await store.redis.get(connection_key(store.prefix, hashed))
    if raw is not None:
        return ConnInfo(**json.loads(raw))
    async with sessions() as session:
        connection = await session.scalar(select(Connection).where(Connection.token_hash == hashed))
    if connection is None or connection.state != "active":
        raise NotFound("unknown or disconnected connect token", code="unknown_connection")
    return await _publish(store, connection)


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
        raise ValidationFailed(
            [{"path": "exit_url", "message": "not in the exit URL allowlist the administrator configured (WLM_EXIT_URL_ALLOWLIST)"}]
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
    ae = policy.application_environments.get(request.application_environment)
    if ae is None:
        known = ", ".join(policy.application_environments) or "none"
        raise ValidationFailed(
            [
                {
                    "path": "application_environment",
                    "message": f"unknown application environment {request.application_environment!r}; defined: {known}",
                }
            ]
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

    # The seed: a server's subsystem type and name must match those of its queue manager's connect; a dynamic
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
    config = AeConfig.of(policy, connection.application_environment) if policy and connection.application_environment else None
    if config is None or connection.node is None:
        return connection, 0
    keys = store.keys(connection.node, connection.application_environment)  # type: ignore[arg-type]
    return connection, await store.extend(keys, config, connection.id)


@dataclass(frozen=True, slots=True)
class Cleanup:
    purged: int = 0  # a queue manager's queued requests removed (their exits called)
    requeued: int = 0  # a server's held requests given back to the front of their queues
    abandoned: int = 0  # held requests that had reached their maximum deliveries
    removed_environments: tuple[str, ...] = ()  # a queue manager's dynamic application environments


async def disconnect(
    session: AsyncSession,
    store: QueueStore,
    cache: ConnectionCache,
    policy: ActivePolicy | None,
    principal: PrincipalInfo,
    token: str,
    *,
    purge_again_after_s: float,
) -> tuple[Connection, bool, Cleanup]:
    """IWM4DIS. Idempotent: a second call reports that the first one did it (and repeats the cleanup).

    The connection is closed first (no more inserts or selects with it), then a queue manager's queued
    requests are purged and a server's held requests are given back."""
    connection = await by_token(session, principal, token, admin_may=True)
    if connection.state == "disconnected":
        # The cleanup is idempotent: repeating it finishes one that failed half-way (Redis unavailable).
        return connection, True, await release(store, policy, ConnInfo.of(connection))
    connection.state = "disconnected"
    connection.disconnected_at = utcnow()
    if connection.principal_id == principal.id:
        connection.disconnect_reason = "requested"
    else:
        connection.disconnect_reason = "forced"
        record(session, principal.name, "connection.force_disconnect", str(connection.id), role=connection.role)
    dynamic = await _remove_dynamic_environments(session, connection.id) if connection.role == "queue_manager" else []
    await session.commit()
    cache.pop(connection.token_hash)
    await store.redis.delete(connection_key(store.prefix, connection.token_hash))
    info = ConnInfo.of(connection)
    if info.role == "queue_manager":
        due_ms = await store.clock_ms() + int(purge_again_after_s * 1000)
        await store.redis.zadd(departed_key(store.prefix), {json.dumps(asdict(info)): due_ms})
    cleanup = await release(store, policy, info)
    if policy is not None and dynamic:
        cleanup = replace(cleanup, purged=cleanup.purged + await _retire(store, policy, info, dynamic), removed_environments=tuple(e.name for e in dynamic))
    return connection, False, cleanup


async def _remove_dynamic_environments(session: AsyncSession, queue_manager_id: int) -> list[EnvironmentSettings]:
    """IWM4AEDF's scope ends with the queue manager: its environments go, and their operator states with them."""
    rows = list(await session.scalars(select(DynamicApplicationEnvironment).where(DynamicApplicationEnvironment.queue_manager_id == queue_manager_id)))
    names = [row.name for row in rows]
    if names:
        await session.execute(delete(ApplicationEnvironmentState).where(ApplicationEnvironmentState.name.in_(names)))
        for row in rows:
            await session.delete(row)
    return [EnvironmentSettings.model_validate(row.definition) for row in rows]


async def _retire(store: QueueStore, policy: ActivePolicy, queue_manager: ConnInfo, environments: Sequence[EnvironmentSettings]) -> int:
    """Purge the queued work of a departed queue manager's dynamic environments, and leave them to the duties
    until what they still hold (held work, records, exits) is finished."""
    purged = 0
    for ae in environments:
        config = AeConfig(policy.class_order, ae.completion_time_ms, ae.backlog_limit, ae.max_deliveries)
        for node in ae.nodes or policy.nodes:
            keys = store.keys(node, ae.name)
            await store.retire(keys, config, queue_manager.id)
            purged += await store.purge(keys, queue_manager.id)
    return purged


async def release(store: QueueStore, policy: ActivePolicy | None, info: ConnInfo) -> Cleanup:
    """What a departing connection leaves in the queues: purge a queue manager's, give back a server's."""
    if policy is None:
        return Cleanup()
    if info.role == "queue_manager":
        purged = 0
        for ae_name, ae in policy.application_environments.items():
            if ae.subsystem_type == info.subsystem_type and ae_name not in policy.dynamic:  # those: see _retire
                for node in policy.nodes:
                    purged += await store.purge(store.keys(node, ae_name), info.id)
        return Cleanup(purged=purged)
    assert info.node and info.application_environment
    config = AeConfig.of(policy, info.application_environment)
    k = store.keys(info.node, info.application_environment)
    if config is None:  # the environment left the policy: nothing can be requeued into it
        await store.redis.hdel(k.servers, str(info.id))
        return Cleanup()
    result = await store.reassign(k, config, server_id=info.id)
    return Cleanup(requeued=result.requeued, abandoned=len(result.abandoned))


async def purge_departed_again(store: QueueStore, policy: ActivePolicy | None) -> int:
    """The second purge of departed queue managers whose time has come (see `active_connection`)."""
    purged = 0
    for member in await store.redis.zrangebyscore(departed_key(store.prefix), "-inf", await store.clock_ms()):
        purged += (await release(store, policy, ConnInfo(**json.loads(member)))).purged
        await store.redis.zrem(departed_key(store.prefix), member)
    return purged


async def expire_silent_servers(
    sessions: async_sessionmaker[AsyncSession],
    store: QueueStore,
    cache: ConnectionCache,
    policy: ActivePolicy,
    keys: AeKeys,
    timeout_s: float,
) -> list[int]:
    """Servers of one environment that neither selected nor heartbeat within the timeout have died without
    IWM4DIS (the seed: the service then does the IWM4DIS processing itself): their connection is closed with
    reason `expired` and what they held goes back to the front of its queue. Returns their ids."""
    expired = await store.silent_servers(keys, int(timeout_s * 1000))
    await close_dead_servers(sessions, store, cache, policy, keys, expired, "expired")
    return expired


async def close_dead_servers(
    sessions: async_sessionmaker[AsyncSession],
    store: QueueStore,
    cache: ConnectionCache,
    policy: ActivePolicy | None,
    keys: AeKeys,
    server_ids: Sequence[int],
    reason: str,
) -> None:
    """The service's IWM4DIS for servers that cannot do their own (fell silent, exited, were stopped with the
    service): their connections are closed with `reason` and what they held goes back to the front of its queue."""
    config = AeConfig.of(policy, keys.ae) if policy is not None else None
    for server_id in server_ids:
        async with sessions() as session:
            connection = await session.get(Connection, server_id)
            if connection is not None and connection.state == "active":
                connection.state, connection.disconnected_at, connection.disconnect_reason = "disconnected", utcnow(), reason
                await session.commit()
                cache.pop(connection.token_hash)
                await store.redis.delete(connection_key(store.prefix, connection.token_hash))
        if config is None:
            await store.redis.hdel(keys.servers, str(server_id))
        else:
            await store.reassign(keys, config, server_id=server_id)


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
