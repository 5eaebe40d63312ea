"""What a departing connection leaves behind: IWM4DIS, and the service's own for servers that cannot do theirs.

A queue manager's queued requests are purged (twice: see `active_connection`) and its dynamic application environments
removed; a server's held requests go back to the front of their queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import record
from app.auth.roles import PrincipalInfo
from app.connections.models import Connection
from app.connections.records import ConnectionRecords
from app.connections.service import ConnectionCache, ConnInfo, by_token
from app.db import utcnow
from app.policy.active import ActivePolicy
from app.policy.models import DynamicApplicationEnvironment
from app.policy.schemas import EnvironmentSettings
from app.queues.base import AeConfig
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.shared.generation import count_change


@dataclass(frozen=True, slots=True)
class Cleanup:
    purged: int = 0  # a queue manager's queued requests removed (their exits called)
    requeued: int = 0  # a server's held requests given back to the front of their queues
    abandoned: int = 0  # held requests that had reached their maximum deliveries
    removed_environments: tuple[str, ...] = ()  # a queue manager's dynamic application environments


class EnvironmentStates(Protocol):
    """The operator's states of application environments. The operator is a layer above the connections, so the caller
    hands its store in (app.operator.service.OperatorStore)."""

    async def forget(self, session: AsyncSession, names: Sequence[str]) -> None: ...


async def disconnect(
    session: AsyncSession,
    store: QueueStore,
    cache: ConnectionCache,
    states: EnvironmentStates,
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
    dynamic = await _remove_dynamic_environments(session, states, connection.id) if connection.role == "queue_manager" else []
    await session.commit()
    cache.pop(connection.token_hash)
    await ConnectionRecords(store.context).forget(connection.token_hash)
    info = ConnInfo.of(connection)
    if info.role == "queue_manager":
        await ConnectionRecords(store.context).note_departed(asdict(info), int(purge_again_after_s * 1000))
    cleanup = await release(store, policy, info)
    if policy is not None and dynamic:
        cleanup = replace(
            cleanup,
            purged=cleanup.purged + await _retire(store, policy, info, dynamic),
            removed_environments=tuple(e.name for e in dynamic),
        )
    return connection, False, cleanup


async def _remove_dynamic_environments(
    session: AsyncSession, states: EnvironmentStates, queue_manager_id: int
) -> list[EnvironmentSettings]:
    """IWM4AEDF's scope ends with the queue manager: its environments go, and their operator states with them."""
    rows = list(
        await session.scalars(
            select(DynamicApplicationEnvironment).where(DynamicApplicationEnvironment.queue_manager_id == queue_manager_id)
        )
    )
    names = [row.name for row in rows]
    if names:
        await states.forget(session, names)
        for row in rows:
            await session.delete(row)
        await count_change(session)  # the last statement before the caller's commit
    return [EnvironmentSettings.model_validate(row.definition) for row in rows]


async def _retire(store: QueueStore, policy: ActivePolicy, queue_manager: ConnInfo, environments: Sequence[EnvironmentSettings]) -> int:
    """Purge the queued work of a departed queue manager's dynamic environments, and leave them to the duties
    until what they still hold (held work, records, exits) is finished."""
    purged = 0
    for ae in environments:
        config = AeConfig(policy.class_order, ae.completion_time_ms, ae.backlog_limit, ae.max_deliveries)
        for node in ae.nodes or policy.nodes:
            keys = store.keys(node, ae.name)
            await store.environments.retire(keys, config, queue_manager.id)
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
    config = policy.queue_config(info.application_environment)
    k = store.keys(info.node, info.application_environment)
    if config is None:  # the environment left the policy: nothing can be requeued into it
        await store.environments.unregister_server(k, info.id)
        return Cleanup()
    result = await store.reassign(k, config, server_id=info.id)
    return Cleanup(requeued=result.requeued, abandoned=len(result.abandoned))


async def purge_departed_again(store: QueueStore, policy: ActivePolicy | None) -> int:
    """The second purge of departed queue managers whose time has come (see `active_connection`)."""
    purged = 0
    records = ConnectionRecords(store.context)
    for departed in await records.departed_due():
        purged += (await release(store, policy, ConnInfo(**departed.record))).purged
        await records.forget_departed(departed)
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
    IWM4DIS (as in z/OS WLM, the service then does the IWM4DIS processing itself): their connection is closed with
    reason `expired` and what they held goes back to the front of its queue. Returns their ids."""
    expired = await store.environments.silent_servers(keys, int(timeout_s * 1000))
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
    config = policy.queue_config(keys.ae) if policy is not None else None
    for server_id in server_ids:
        async with sessions() as session:
            connection = await session.get(Connection, server_id)
            if connection is not None and connection.state == "active":
                connection.state, connection.disconnected_at, connection.disconnect_reason = "disconnected", utcnow(), reason
                await session.commit()
                cache.pop(connection.token_hash)
                await ConnectionRecords(store.context).forget(connection.token_hash)
        if config is None:
            await store.environments.unregister_server(keys, server_id)
        else:
            await store.reassign(keys, config, server_id=server_id)
