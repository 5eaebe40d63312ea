"""The manager loop's server decisions, per environment and node, and the server limits (IWM4SLI) they obey.

How many servers each class needs and which server serves which class come from the pure functions of
spark_jobs.manager.servers, fed by the latest goal evaluation (app.servers.performance); the select script reads the
result (a server's home class first among the classes of its importance; a retired server is told to end, 0C14).

Results are kept in Redis (hashes per environment and node), so every replica answers the same; Prometheus
gauges of the deciding process carry the same figures.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import record
from app.auth.roles import PrincipalInfo
from app.connections.service import ConnectionCache, ConnInfo, active_connection
from app.errors import Forbidden
from app.policy.active import ActivePolicy
from app.policy.schemas import ServerLimits
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.servers.limits import beyond_max, effective_limits
from app.servers.schemas import (
    NodeScaling,
    PeriodPerformance,
    ScalingOut,
    ServerInstancesOut,
    ServerLimitsIn,
    ServerLimitsOut,
    ServerLimitsOverride,
)
from spark_jobs.manager.servers import ClassFigures, decide


@dataclass(frozen=True, slots=True)
class ServerDecision:
    desired: dict[str, int]  # per service class
    connected: int
    retired: list[int]

    @property
    def desired_total(self) -> int:
        return sum(self.desired.values())


async def manage_environment(
    store: QueueStore, policy: ActivePolicy, keys: AeKeys, judged: list[PeriodPerformance], drain_s: float, *, launching: bool
) -> ServerDecision:
    """Decide how many servers each service class of one environment on one node needs (Erlang C from its arrival
    rate, service time and goal, and more to serve its backlog within `drain_s`), share them out under the
    environment's limits (most important, worst PI first), give each connected server a home class, and retire
    surplus servers: those beyond `max` always (a hard limit), and those beyond what the goals and `min` need when
    the service starts the environment's servers itself (it has a start command and `launching` is on, so it can
    start them again). Overflow servers are not managed."""
    ae = policy.application_environments[keys.ae]
    limits, _ = await limits_in_force(store, policy, keys.ae)
    managed = await managed_servers(store, keys)
    tasks_per_server = statistics.median([info["tasks"] for info in managed.values()]) if managed else 1
    first_periods = {p.service_class: p for p in judged if p.period == 1}
    classes = []
    for name in policy.class_order:
        first, seen = policy.service_classes[name].periods[0], first_periods.get(name)
        if seen is None:
            classes.append(ClassFigures(name, first.goal.rule(), first.importance))
        else:
            found = (seen.ended_per_second, seen.avg_execution_ms, seen.performance_index, seen.queued)
            classes.append(ClassFigures(name, first.goal.rule(), first.importance, *found))
    group_caps = {
        name: (group.name, group.max_in_flight)
        for name, group in zip(policy.class_order, policy.class_groups, strict=False)
        if group is not None and group.max_in_flight is not None
    }
    homes = await store.results.server_homes(keys)
    decision = decide(
        classes,
        limits.rule(),
        {sid: homes.get(str(sid)) for sid in managed},
        tasks_per_server=tasks_per_server,
        drain_s=drain_s,
        group_caps=group_caps,
        retire_surplus=bool(ae.start_command and launching),
    )
    # Read back by /metrics, as by autoscalers.
    await store.results.publish_decision(keys, decision.homes, decision.retired, decision.desired)
    return ServerDecision(decision.desired, len(managed), decision.retired)


async def managed_servers(store: QueueStore, keys: AeKeys) -> dict[int, dict[str, Any]]:
    """The servers registered with one environment on one node that the manager manages (not overflow servers)."""
    return {sid: info for sid, info in (await store.environments.registered_servers(keys)).items() if not info.get("overflow")}


# ---------------------------------------------------------------------------------------------------------------------
# IWM4SLI: server limits (app/servers/limits.py)
# ---------------------------------------------------------------------------------------------------------------------

SERVER_LIMITS_ACTION = "servers.limits"


async def limits_in_force(store: QueueStore, policy: ActivePolicy, ae: str) -> tuple[ServerLimits, ServerLimitsOverride | None]:
    return _in_force(policy, ae, await store.environments.server_limits(ae))


def _in_force(policy: ActivePolicy, ae: str, stored: str | None) -> tuple[ServerLimits, ServerLimitsOverride | None]:
    override = ServerLimitsOverride.model_validate_json(stored) if stored else None
    return effective_limits(policy.application_environments[ae].server_limits, override)


def limits_out(policy: ActivePolicy, ae: str, stored: str | None) -> ServerLimitsOut:
    """The limits in force for an environment of `policy`, given what IWM4SLI stored for it (`environments.server_limits` of the queues)."""
    limits, override = _in_force(policy, ae, stored)
    return ServerLimitsOut(
        application_environment=ae,
        min=limits.min,
        max=limits.max,
        spread_min=limits.spread_min,
        source=override.source if override else "policy",
        set_by=override.set_by if override else None,
        set_at=override.set_at if override else None,
        policy_limits=policy.application_environments[ae].server_limits,
    )


def _known(policy: ActivePolicy, name: str) -> str:
    return policy.environment(name.upper()).name


async def server_limits(store: QueueStore, policy: ActivePolicy, name: str) -> ServerLimitsOut:
    ae = _known(policy, name)
    return limits_out(policy, ae, await store.environments.server_limits(ae))


async def set_server_limits(
    session: AsyncSession,
    store: QueueStore,
    policy: ActivePolicy,
    principal: PrincipalInfo,
    server: ConnInfo | None,
    name: str,
    body: ServerLimitsIn,
) -> ServerLimitsOut:
    """IWM4SLI by `server` (a connected server, which may set only its own environment's limits) or, with no server,
    by an operator (the caller checks the role). Servers beyond a new maximum are retired at once; the manager and
    the launcher obey the limits from their next pass."""
    ae = _known(policy, name)
    if server is not None and server.application_environment != ae:
        raise Forbidden(
            f"a server of {server.application_environment} may set the server limits of its own environment only, not {ae}",
            code="other_application_environment",
            application_environment=server.application_environment,
        )
    limits = body.limits()
    override = ServerLimitsOverride(
        limits=limits,
        policy_limits=policy.application_environments[ae].server_limits,
        source="server" if server else "operator",
        set_by=principal.name,
        set_at=datetime.fromtimestamp(await store.clock_ms() / 1000, UTC),
    )
    record(
        session,
        principal.name,
        SERVER_LIMITS_ACTION,
        ae,
        **limits.model_dump(),
        source=override.source,
        connection=server.id if server else None,
    )
    await session.commit()
    await store.environments.set_server_limits(ae, override.model_dump_json())
    for node in policy.nodes:
        if policy.hosts(ae, node):
            keys = store.keys(node, ae)
            await store.environments.retire_servers(keys, beyond_max(list(await managed_servers(store, keys)), limits.max))
    return await server_limits(store, policy, ae)


async def reset_server_limits(
    session: AsyncSession, store: QueueStore, policy: ActivePolicy, principal: PrincipalInfo, name: str
) -> ServerLimitsOut:
    """An operator puts the policy's limits back in force."""
    ae = _known(policy, name)
    if await store.environments.reset_server_limits(ae):
        record(session, principal.name, SERVER_LIMITS_ACTION, ae, reset=True)
        await session.commit()
    return await server_limits(store, policy, ae)


async def calling_server(
    sessions: async_sessionmaker[AsyncSession], store: QueueStore, cache: ConnectionCache, principal: PrincipalInfo, token: str
) -> ConnInfo:
    """The caller's server connection by its connect token: IWMSINF and IWM4SLI are calls of a connected server."""
    return await active_connection(sessions, store, cache, principal, token, "server")


async def server_instances(store: QueueStore, node: str, application_environment: str) -> ServerInstancesOut:
    keys = store.keys(node, application_environment)
    total, per_class = await store.results.desired_servers(keys)
    connected = await connected_servers(store, keys)
    return ServerInstancesOut(
        application_environment=application_environment,
        node=node,
        desired_servers=total,
        connected_servers=connected,
        start_more=max(0, total - connected),
        desired_per_service_class=per_class,
    )


async def scaling(store: QueueStore, policy: ActivePolicy, name: str) -> ScalingOut:
    ae = _known(policy, name)
    nodes = []
    for node in policy.nodes:
        if policy.hosts(ae, node):
            keys = store.keys(node, ae)
            total, per_class = await store.results.desired_servers(keys)
            managed = await managed_servers(store, keys)
            homes = await store.results.server_homes(keys)
            nodes.append(
                NodeScaling(
                    node=node,
                    desired_servers=total,
                    connected_servers=len(managed),
                    desired_per_service_class=per_class,
                    # by the home class the manager's latest decision gave each
                    connected_per_service_class=dict(Counter(homes[str(server)] for server in managed if str(server) in homes)),
                )
            )
    return ScalingOut(
        application_environment=ae,
        desiredServers=sum(n.desired_servers for n in nodes),
        connectedServers=sum(n.connected_servers for n in nodes),
        nodes=nodes,
    )


async def connected_servers(store: QueueStore, keys: AeKeys) -> int:
    """Servers registered with one environment on one node, overflow servers not counted."""
    return len(await managed_servers(store, keys))
