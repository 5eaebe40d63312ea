"""DISPLAY WLM,APPLENV=... (and DYNAPPL): each application environment's state with what it has on each node (servers,
requests held and queued, performance, limits), read from the queues in one round trip."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.errors import NotFound
from app.operator.commands import DisplayCommand
from app.operator.schemas import ApplicationEnvironmentList, ApplicationEnvironmentOut, NodeActivity, StartError
from app.operator.service import UNKNOWN_APPLICATION_ENVIRONMENT, AEStateRecord, OperatorStore, state_in
from app.policy.active import ActivePolicy
from app.queues.store import QueueStore
from app.servers.schemas import PeriodPerformance, ServerLimitsOut
from app.servers.service import limits_out


def display_text(command: DisplayCommand) -> str:
    return f"DISPLAY WLM,{'DYNAPPL' if command.dynamic else 'APPLENV'}={command.pattern}"


async def display(
    queues: QueueStore, store: OperatorStore, policy: ActivePolicy | None, command: DisplayCommand
) -> ApplicationEnvironmentList:
    """The environments matching the command's pattern, by name: those of the policy and those that left it (DELETING)."""
    states = await store.states()
    names = set(policy.application_environments if policy else ()) | set(states)
    dynamic = policy.dynamic if policy else {}
    chosen = (name for name in names if (name in dynamic) == command.dynamic and command.matches(name))
    return ApplicationEnvironmentList(command=display_text(command), items=await _describe(queues, policy, states, sorted(chosen)))


async def describe(queues: QueueStore, store: OperatorStore, policy: ActivePolicy | None, name: str) -> ApplicationEnvironmentOut:
    name = name.upper()
    states = await store.states()
    if name not in states and (policy is None or name not in policy.application_environments):
        raise NotFound(f"no application environment {name}", code=UNKNOWN_APPLICATION_ENVIRONMENT, application_environment=name)
    [described] = await _describe(queues, policy, states, [name])
    return described


async def _describe(
    queues: QueueStore, policy: ActivePolicy | None, states: Mapping[str, AEStateRecord], names: Sequence[str]
) -> list[ApplicationEnvironmentOut]:
    places = _places(policy, names)
    names_in_policy = [name for name in names if policy is not None and name in policy.application_environments]
    snapshots, stored_limits = await queues.environments.snapshots([queues.keys(node, name) for name, node in places], names_in_policy)
    limits = {name: limits_out(policy, name, stored) for name, stored in zip(names_in_policy, stored_limits, strict=True) if policy}
    rank = {service_class: index for index, service_class in enumerate(policy.class_order if policy else ())}
    activity: dict[str, list[NodeActivity]] = {name: [] for name in names}
    # PI of each class's first period, the worst over the nodes (the latest goal evaluation, app.servers.performance).
    performance: dict[str, dict[str, float | None]] = {name: {} for name in names}
    start_errors: dict[str, StartError] = {}
    for (name, node), snapshot in zip(places, snapshots, strict=True):
        if snapshot.start_error:
            error = StartError.model_validate_json(snapshot.start_error)
            if name not in start_errors or error.at > start_errors[name].at:
                start_errors[name] = error
        for raw in snapshot.performance:
            period = PeriodPerformance.model_validate_json(raw)
            if period.period == 1:
                seen = performance[name].get(period.service_class)
                pi = period.performance_index
                performance[name][period.service_class] = pi if seen is None or (pi is not None and pi > seen) else seen
        queued = _most_important_first({sc: count for sc, count in snapshot.depths.items() if count > 0}, rank)
        on_node = NodeActivity(node=node, servers=snapshot.servers, in_flight=snapshot.in_flight, queued=queued)
        in_policy = policy is not None and name in policy.application_environments
        if in_policy or on_node.servers or on_node.in_flight or on_node.queued:
            activity[name].append(on_node)
    return [
        _display_line(name, policy, states, activity[name], rank, performance[name] or None, start_errors.get(name), limits.get(name))
        for name in names
    ]


def _places(policy: ActivePolicy | None, names: Sequence[str]) -> list[tuple[str, str]]:
    """(environment, node) pairs to read: the nodes hosting each environment; for one that left the policy, every node,
    to find what it left there."""
    if policy is None:
        return []
    environments = policy.application_environments
    return [(name, node) for name in names for node in policy.nodes if name not in environments or policy.hosts(name, node)]


def _most_important_first(queued: Mapping[str, int], rank: Mapping[str, int]) -> dict[str, int]:
    """Service classes in the order select serves them; classes the policy no longer has last, by name."""
    return dict(sorted(queued.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def _display_line(
    name: str,
    policy: ActivePolicy | None,
    states: Mapping[str, AEStateRecord],
    nodes: list[NodeActivity],
    rank: Mapping[str, int],
    performance: dict[str, float | None] | None,
    last_start_error: StartError | None,
    server_limits: ServerLimitsOut | None,
) -> ApplicationEnvironmentOut:
    definition = policy.application_environments.get(name) if policy else None
    stored = states.get(name)
    queued: dict[str, int] = {}
    for node in nodes:
        for service_class, count in node.queued.items():
            queued[service_class] = queued.get(service_class, 0) + count
    return ApplicationEnvironmentOut(
        name=name,
        state=state_in(states, name, policy),
        in_policy=definition is not None,
        dynamic=policy is not None and name in policy.dynamic,
        subsystem_type=definition.subsystem_type if definition else None,
        changed_at=stored.changed_at if stored else None,
        changed_by=stored.changed_by if stored else None,
        reason=stored.reason if stored else None,
        refreshed_at=stored.refreshed_at if stored else None,
        servers=sum(node.servers for node in nodes),
        in_flight=sum(node.in_flight for node in nodes),
        queued=_most_important_first(queued, rank),
        queued_total=sum(queued.values()),
        nodes=nodes,
        performance=performance,
        last_start_error=last_start_error,
        server_limits=server_limits,
    )
