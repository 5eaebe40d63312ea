"""The manager loop: goal evaluation and server decisions, per environment and node.

Goal evaluation: how each service class period did, from the requests that ended within the window (samples kept
by the end scripts), judged by the pure functions of app.policy.goals. Server decisions: how many servers each
class needs and which server serves which class, by the pure functions of app.servers.decisions; the select
script reads the result (a server's home class first; a retired server is told to end, 0C14).

Results are kept in Redis (hashes per environment and node), so every replica answers the same; Prometheus
gauges of the evaluating process carry the same figures.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Gauge
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import record
from app.auth.roles import PrincipalInfo
from app.connections.service import ConnInfo
from app.errors import Forbidden, NotFound
from app.policy.active import ActivePolicy, period_number
from app.policy.goals import evaluate
from app.policy.schemas import ServerLimits
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.repeated_failures import RepeatedFailures
from app.servers.decisions import ClassDemand, allocate, assign_servers, servers_for_goal
from app.servers.limits import beyond_max, effective_limits
from app.servers.schemas import (
    NodeScaling,
    PeriodPerformance,
    ScalingOut,
    ServerInstancesOut,
    ServerLimitsIn,
    ServerLimitsOut,
    ServerLimitsOverride,
    ServiceClassPerformance,
)

_LABELS = ["application_environment", "node", "service_class", "period"]
PI = Gauge("wlm_service_class_performance_index", "Performance index of a service class period (<= 1: goal met)", _LABELS)
ENDED_RATE = Gauge("wlm_service_class_ended_per_second", "Requests ended per second over the evaluation window", _LABELS)
AVG_RESPONSE = Gauge("wlm_service_class_avg_response_seconds", "Average response time (insert to end) over the window", _LABELS)
DESIRED = Gauge("wlm_servers_desired", "Servers the manager wants for a service class", ["application_environment", "node", "service_class"])
CONNECTED = Gauge("wlm_servers_connected", "Servers connected (overflow servers not counted)", ["application_environment", "node"])
DESIRED_TOTAL = "*"
VELOCITY = Gauge("wlm_service_class_velocity", "Execution velocity: 100 x execution / (execution + queue delay)", _LABELS)

log = logging.getLogger(__name__)
# Samples and class periods that cannot be judged: each environment and class period is judged on its own, so one of
# them never keeps the others from their PI and server decisions; the cause is logged when it starts, not every tick.
UNJUDGED = RepeatedFailures(log)


async def evaluate_environment(store: QueueStore, policy: ActivePolicy, keys: AeKeys, window_s: float) -> list[PeriodPerformance]:
    """Judge every service class period of one environment on one node and publish the result. A class period with
    nothing ended in the window has an unknown PI (None), except discretionary work (always 0.81)."""
    now = await store.clock_ms()
    samples_by_period: dict[tuple[str, int], list[tuple[float, float, float]]] = defaultdict(list)
    invalid = 0
    for sample in await store.samples(keys, now - int(window_s * 1000)):
        spec = policy.service_classes.get(sample.service_class)
        if spec is None:
            continue  # a class the policy has dropped since: nothing to judge it against
        if min(sample.response_ms, sample.queue_ms, sample.execution_ms) < 0:
            invalid += 1  # no script writes one (one clock: Redis's); a sample of an older version might
            continue
        period = period_number([p.duration_ms for p in spec.periods], sample.response_ms)
        samples_by_period[(sample.service_class, period)].append((sample.response_ms, sample.queue_ms, sample.execution_ms))
    where = f"goal evaluation of {keys.ae} on {keys.node}"
    if invalid:
        UNJUDGED.failed(where, "samples with a negative duration left out", f"{invalid} in the window")
    else:
        UNJUDGED.succeeded(where)
    queued = {sc: int(depth) for sc, depth in (await store.redis.hgetall(keys.depth)).items()}
    evaluated_at = datetime.fromtimestamp(now / 1000, UTC)
    results = []
    for name in policy.class_order:
        spec = policy.service_classes[name]
        for period in spec.periods:
            window = samples_by_period.get((name, period.number), [])
            if not window and not queued.get(name) and period.number > 1:
                continue  # later periods appear once work reaches them
            try:
                judged = evaluate(period.goal, window)
            except ValueError as exc:
                UNJUDGED.failed(f"{where}, class {name} period {period.number}", "cannot be judged", str(exc))
                continue
            UNJUDGED.succeeded(f"{where}, class {name} period {period.number}")
            results.append(
                PeriodPerformance(
                    service_class=name,
                    period=period.number,
                    application_environment=keys.ae,
                    node=keys.node,
                    importance=period.importance,
                    goal=period.goal.model_dump(),
                    window_seconds=window_s,
                    evaluated_at=evaluated_at,
                    ended=judged.ended,
                    ended_per_second=judged.ended / window_s,
                    avg_response_ms=judged.avg_response_ms,
                    p50_response_ms=judged.p50_response_ms,
                    p90_response_ms=judged.p90_response_ms,
                    p99_response_ms=judged.p99_response_ms,
                    avg_queue_ms=judged.avg_queue_ms,
                    avg_execution_ms=judged.avg_execution_ms,
                    velocity=judged.velocity,
                    distribution=list(judged.distribution) if judged.distribution is not None else None,
                    performance_index=judged.pi,
                    goal_met=judged.goal_met,
                    goal_met_share=judged.goal_met_share,
                    queued=queued.get(name, 0) if period.number == 1 else 0,
                )
            )
    await _publish(store, keys, results)
    return results


async def _publish(store: QueueStore, keys: AeKeys, results: list[PeriodPerformance]) -> None:
    fields = {f"{r.service_class}:{r.period}": r.model_dump_json() for r in results}
    async with store.redis.pipeline(transaction=True) as pipe:
        pipe.delete(keys.performance)
        if fields:
            pipe.hset(keys.performance, mapping=fields)
        await pipe.execute()
    for r in results:
        labels = (r.application_environment, r.node, r.service_class, str(r.period))
        ENDED_RATE.labels(*labels).set(r.ended_per_second)
        if r.performance_index is not None:
            PI.labels(*labels).set(r.performance_index)
        if r.avg_response_ms is not None:
            AVG_RESPONSE.labels(*labels).set(r.avg_response_ms / 1000)
        if r.velocity is not None:
            VELOCITY.labels(*labels).set(r.velocity)


async def latest_performance(store: QueueStore, keys: AeKeys) -> list[PeriodPerformance]:
    """The latest published evaluation of one environment on one node (empty before the first)."""
    return [PeriodPerformance.model_validate_json(raw) for raw in (await store.redis.hgetall(keys.performance)).values()]


async def service_class_performance(store: QueueStore, policy: ActivePolicy, service_class: str) -> ServiceClassPerformance:
    name = service_class.upper()
    if name not in policy.service_classes:
        raise NotFound(f"no service class {service_class!r} in the active policy", code="unknown_service_class")
    periods = []
    for ae in policy.application_environments:
        for node in policy.nodes:
            if policy.hosts(ae, node):
                periods += [p for p in await latest_performance(store, store.keys(node, ae)) if p.service_class == name]
    periods.sort(key=lambda p: (p.application_environment, p.node, p.period))
    return ServiceClassPerformance(service_class=name, periods=periods)


@dataclass(frozen=True, slots=True)
class ServerDecision:
    desired: dict[str, int]  # per service class
    connected: int
    retired: list[int]

    @property
    def desired_total(self) -> int:
        return sum(self.desired.values())


async def manage_environment(
    store: QueueStore, policy: ActivePolicy, keys: AeKeys, judged: list[PeriodPerformance], window_s: float, *, launching: bool
) -> ServerDecision:
    """Decide how many servers each service class of one environment on one node needs (Erlang C from its arrival
    rate, service time and goal), share them out under the environment's limits (most important, worst PI first),
    give each connected server a home class, and retire surplus servers: those beyond `max` always (a hard limit),
    and those beyond what the goals and `min` need when the service starts the environment's servers itself (it
    has a start command and `launching` is on, so it can start them again). Overflow servers are not managed."""
    ae = policy.application_environments[keys.ae]
    limits, _ = await limits_in_force(store, policy, keys.ae)
    managed = await managed_servers(store, keys)
    tasks_per_server = statistics.median([info["tasks"] for info in managed.values()]) if managed else 1
    first_periods = {p.service_class: p for p in judged if p.period == 1}
    demands = []
    for name in policy.class_order:
        spec, seen = policy.service_classes[name], first_periods.get(name)
        queued = seen.queued if seen else 0
        # Arrivals: what ended per second, plus what waits, to be drained within a window.
        rate = (seen.ended_per_second if seen else 0.0) + queued / window_s
        service_s = seen.avg_execution_ms / 1000 if seen and seen.avg_execution_ms else None
        tasks = servers_for_goal(spec.periods[0].goal, rate, service_s).servers if rate > 0 and service_s else 0
        pi = seen.performance_index if seen else None
        demands.append(ClassDemand(name, spec.periods[0].importance, pi, math.ceil(tasks / tasks_per_server), queued > 0))
    allocation = allocate(demands, limits)
    homes = await store.redis.hgetall(keys.assign)
    assignment = assign_servers({sid: homes.get(str(sid)) for sid in managed}, [(a.name, a.servers) for a in allocation.values()])
    over_max = max(0, len(managed) - limits.max) if limits.max is not None else 0
    retired = assignment.surplus if ae.start_command and launching else assignment.surplus[:over_max]
    async with store.redis.pipeline(transaction=True) as pipe:
        pipe.delete(keys.assign, keys.retire, keys.desired)
        if assignment.homes:
            pipe.hset(keys.assign, mapping={str(sid): name for sid, name in assignment.homes.items()})
        if retired:
            pipe.sadd(keys.retire, *[str(sid) for sid in retired])
        desired = {a.name: a.servers for a in allocation.values()}
        pipe.hset(keys.desired, mapping={**desired, DESIRED_TOTAL: sum(desired.values())})
        await pipe.execute()
    for name, count in desired.items():
        DESIRED.labels(keys.ae, keys.node, name).set(count)
    CONNECTED.labels(keys.ae, keys.node).set(len(managed))
    return ServerDecision(desired, len(managed), retired)


async def managed_servers(store: QueueStore, keys: AeKeys) -> dict[int, dict[str, Any]]:
    """The servers registered with one environment on one node that the manager manages (not overflow servers)."""
    registered = {int(sid): json.loads(raw) for sid, raw in (await store.redis.hgetall(keys.servers)).items()}
    return {sid: info for sid, info in registered.items() if not info.get("overflow")}


# ---------------------------------------------------------------------------------------------------------------------
# IWM4SLI: server limits (app/servers/limits.py)
# ---------------------------------------------------------------------------------------------------------------------

SERVER_LIMITS_ACTION = "servers.limits"


async def limits_in_force(store: QueueStore, policy: ActivePolicy, ae: str) -> tuple[ServerLimits, ServerLimitsOverride | None]:
    return _in_force(policy, ae, await store.server_limits(ae))


def _in_force(policy: ActivePolicy, ae: str, stored: str | None) -> tuple[ServerLimits, ServerLimitsOverride | None]:
    override = ServerLimitsOverride.model_validate_json(stored) if stored else None
    return effective_limits(policy.application_environments[ae].server_limits, override)


def limits_out(policy: ActivePolicy, ae: str, stored: str | None) -> ServerLimitsOut:
    """The limits in force for an environment of `policy`, given what IWM4SLI stored for it (QueueStore.server_limits)."""
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
    ae = name.upper()
    if ae not in policy.application_environments:
        raise NotFound(f"no application environment {name!r} in the active policy", code="unknown_application_environment", application_environment=ae)
    return ae


async def server_limits(store: QueueStore, policy: ActivePolicy, name: str) -> ServerLimitsOut:
    ae = _known(policy, name)
    return limits_out(policy, ae, await store.server_limits(ae))


async def set_server_limits(
    session: AsyncSession, store: QueueStore, policy: ActivePolicy, principal: PrincipalInfo, server: ConnInfo | None, name: str, body: ServerLimitsIn
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
    record(session, principal.name, SERVER_LIMITS_ACTION, ae, **limits.model_dump(), source=override.source, connection=server.id if server else None)
    await session.commit()
    await store.set_server_limits(ae, override.model_dump_json())
    for node in policy.nodes:
        if policy.hosts(ae, node):
            keys = store.keys(node, ae)
            await store.retire_servers(keys, beyond_max(list(await managed_servers(store, keys)), limits.max))
    return await server_limits(store, policy, ae)


async def reset_server_limits(session: AsyncSession, store: QueueStore, policy: ActivePolicy, principal: PrincipalInfo, name: str) -> ServerLimitsOut:
    """An operator puts the policy's limits back in force."""
    ae = _known(policy, name)
    if await store.reset_server_limits(ae):
        record(session, principal.name, SERVER_LIMITS_ACTION, ae, reset=True)
        await session.commit()
    return await server_limits(store, policy, ae)


async def desired_servers(store: QueueStore, keys: AeKeys) -> tuple[int, dict[str, int]]:
    """The manager's latest decision for one environment on one node: the total, and per service class."""
    raw = await store.redis.hgetall(keys.desired)
    per_class = {name: int(count) for name, count in raw.items() if name != DESIRED_TOTAL}
    return int(raw.get(DESIRED_TOTAL, 0)), per_class


async def server_instances(store: QueueStore, node: str, application_environment: str) -> ServerInstancesOut:
    keys = store.keys(node, application_environment)
    total, per_class = await desired_servers(store, keys)
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
            total, per_class = await desired_servers(store, keys)
            managed = await managed_servers(store, keys)
            homes = await store.redis.hgetall(keys.assign)
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
