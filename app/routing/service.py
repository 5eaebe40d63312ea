"""Routing a work request to a node: the candidates' attributes (policy, then operators' overrides), the links'
states, and each process's sequence state for the algorithm's least-recently-used choice.

The sequence factors are this process's, as in MQ they are each queue manager's own: with several replicas each
keeps its own, and each one's share of the requests follows the weights. They are reset, as the seed says, when the
workload attributes of an environment's nodes change or a node joins (its link comes into the best state group).

Link states come from what the service sees of a node: STOPPED when an operator stopped the link; RUNNING while
servers of any environment are connected there; RETRYING when none are and some ended unexpectedly within the last
ten minutes (the STOPPED rule's window); INACTIVE when none are (work still queues there, as a message on an
inactive channel starts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from prometheus_client import Counter
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import record
from app.db import utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.policy.active import ActivePolicy
from app.policy.schemas import InstanceRouting, NodeRouting
from app.operator.states import UNEXPECTED_TERMINATION_WINDOW_S
from app.queues.store import QueueStore
from app.routing.algorithm import (
    LINK_STATE_GROUPS,
    Candidate,
    Decision,
    LinkState,
    LocalQueueManager,
    SequenceState,
    UseQueue,
    after_choice,
    choose,
    with_sequence,
)
from app.routing.models import NODE_ITSELF, RoutingOverride
from app.ttl_cache import TtlCache

ROUTED = Counter("wlm_routed_requests_total", "Work requests routed to a node", ["application_environment", "node", "how"])
ALTER_ACTION = "routing.alter"
LINK_STOPPED = "link_stopped"
# How often a process looks again at which nodes have servers.
LINK_STATE_SECONDS = 1.0

Overrides = Mapping[tuple[str, str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class NodeAttributes:
    node: str
    routing: NodeRouting
    link: LinkState
    overridden: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NodeActivity:
    servers: int
    recent_terminations: int


class RoutingStore:
    """Operators' overrides (database, cached like the AE states) and the links' states (Redis, cached briefly)."""

    OVERRIDES = "overrides"

    def __init__(self, sessions: async_sessionmaker[AsyncSession], queues: QueueStore, ttl_seconds: float) -> None:
        self.sessions, self.queues = sessions, queues
        self._overrides: TtlCache[Overrides] = TtlCache(ttl_seconds)
        self._links: TtlCache[Mapping[str, NodeActivity]] = TtlCache(LINK_STATE_SECONDS)

    async def overrides(self) -> Overrides:
        return await self._overrides.get_or_load(self.OVERRIDES, self._load_overrides)

    async def _load_overrides(self) -> Overrides:
        async with self.sessions() as session:
            rows = await session.scalars(select(RoutingOverride))
            return MappingProxyType({(row.node, row.application_environment): MappingProxyType(row.attributes) for row in rows})

    async def node_activity(self, policy: ActivePolicy) -> Mapping[str, NodeActivity]:
        """Per node: servers connected, and unexpected server terminations within the STOPPED rule's window."""

        async def load() -> Mapping[str, NodeActivity]:
            since = await self.queues.clock_ms() - int(UNEXPECTED_TERMINATION_WINDOW_S * 1000)
            pipe = self.queues.redis.pipeline(transaction=False)
            places = [(node, ae) for node in policy.nodes for ae in policy.application_environments if policy.hosts(ae, node)]
            for node, ae in places:
                keys = self.queues.keys(node, ae)
                pipe.hlen(keys.servers)
                pipe.zcount(keys.terminations, since, "+inf")
            counts = dict.fromkeys(policy.nodes, (0, 0))
            replies = await pipe.execute()
            for (node, _), servers, terminations in zip(places, replies[::2], replies[1::2], strict=True):
                counts[node] = (counts[node][0] + int(servers), counts[node][1] + int(terminations))
            return MappingProxyType({node: NodeActivity(*count) for node, count in counts.items()})

        return await self._links.get_or_load(f"v{policy.version}:{len(policy.application_environments)}", load)

    def invalidate(self) -> None:
        self._overrides.clear()
        self._links.clear()


def node_routing(policy: ActivePolicy, node: str, overrides: Overrides) -> NodeRouting:
    defined = next((n for n in policy.definition.nodes if n.name == node), None)
    base = NodeRouting.model_validate(defined.model_dump(include=set(NodeRouting.model_fields))) if defined else NodeRouting()
    changed = {k: v for k, v in overrides.get((node, NODE_ITSELF), {}).items() if k in NodeRouting.model_fields}
    return base.model_copy(update=changed)


def instance_routing(policy: ActivePolicy, ae: str, node: str, overrides: Overrides) -> InstanceRouting:
    environment = policy.application_environments[ae]
    base = environment.instances.get(node, InstanceRouting())
    return base.model_copy(update=dict(overrides.get((node, ae), {})))


def link_state(node: str, activity: Mapping[str, NodeActivity], overrides: Overrides) -> LinkState:
    if overrides.get((node, NODE_ITSELF), {}).get(LINK_STOPPED):
        return LinkState.STOPPED
    seen = activity.get(node, NodeActivity(0, 0))
    if seen.servers:
        return LinkState.RUNNING
    # Servers that died and none back yet: like a channel that failed and is being retried.
    return LinkState.RETRYING if seen.recent_terminations else LinkState.INACTIVE


@dataclass
class _EnvironmentRouting:
    """What a process keeps per environment: its candidates as last worked out (and from what), and the sequence
    state with the fingerprint that resets it."""

    sources: tuple[Any, ...]
    candidates: list[Candidate]
    fingerprint: tuple[Any, ...]
    sequence: SequenceState


_NO_ACTIVITY: Mapping[str, NodeActivity] = MappingProxyType({})


class Router:
    """One per process: chooses nodes and keeps the sequence state per environment."""

    def __init__(self, store: RoutingStore) -> None:
        self.store = store
        self._environments: dict[str, _EnvironmentRouting] = {}
        self._local_queue_managers: dict[str, tuple[ActivePolicy, Overrides, LocalQueueManager]] = {}

    async def _environment(self, policy: ActivePolicy, ae: str) -> _EnvironmentRouting:
        """The environment's instances on the nodes hosting it, in the policy's node order, with their attributes
        (worked out again only when the policy, the overrides or the servers seen change: inserts call this)."""
        overrides = await self.store.overrides()
        hosting = [n for n in policy.nodes if policy.hosts(ae, n)]
        # Link states only matter between nodes: an environment on one node needs no look at the servers.
        activity = await self.store.node_activity(policy) if len(hosting) > 1 else _NO_ACTIVITY
        sources = (policy, overrides, activity)
        known = self._environments.get(ae)
        if known is not None and all(a is b for a, b in zip(known.sources, sources, strict=True)):
            return known
        candidates, attributes = [], []
        for node in hosting:
            routing, instance = node_routing(policy, node, overrides), instance_routing(policy, ae, node, overrides)
            attributes.append((node, tuple(routing.model_dump().values()), tuple(instance.model_dump().values())))
            candidates.append(
                Candidate(
                    node=node,
                    put_enabled=instance.put_enabled,
                    rank=instance.rank,
                    priority=instance.priority,
                    use_queue=UseQueue(instance.use_queue),
                    link_rank=routing.rank,
                    suspended=routing.suspended,
                    link=link_state(node, activity, overrides),
                    network_priority=routing.network_priority,
                    weight=routing.weight,
                )
            )
        # Every routing attribute of the nodes, and which nodes have usable links: a change of either (an attribute
        # altered, a node joining or coming back) resets the sequence factors, so no node is flooded to catch up.
        fingerprint = (tuple(attributes), tuple(c.node for c in candidates if c.link in LINK_STATE_GROUPS[0]))
        sequence = known.sequence if known is not None and known.fingerprint == fingerprint else SequenceState({}, {})
        self._environments[ae] = _EnvironmentRouting(sources, candidates, fingerprint, sequence)
        return self._environments[ae]

    async def _local(self, policy: ActivePolicy, node: str | None) -> LocalQueueManager:
        if node is None or node not in policy.nodes:
            return LocalQueueManager()
        overrides = await self.store.overrides()
        known = self._local_queue_managers.get(node)
        if known is None or known[0] is not policy or known[1] is not overrides:
            routing = node_routing(policy, node, overrides)
            known = (policy, overrides, LocalQueueManager(node, UseQueue(routing.use_queue), routing.most_recently_used))
            self._local_queue_managers[node] = known
        return known[2]

    async def decide(self, policy: ActivePolicy, ae: str, queue_manager_node: str | None) -> tuple[Decision, list[Candidate]]:
        """The decision for a hypothetical request, changing nothing."""
        local = await self._local(policy, queue_manager_node)
        environment = await self._environment(policy, ae)
        candidates = with_sequence(environment.candidates, environment.sequence)
        return choose(candidates, local), candidates

    async def route(self, policy: ActivePolicy, ae: str, queue_manager_node: str | None, count: int = 1) -> str:
        """The node for `count` requests inserted together (one decision, like MQ's bind on open). The choice and
        the sequence's step are made together, with no wait between, so concurrent inserts take turns."""
        local = await self._local(policy, queue_manager_node)
        environment = await self._environment(policy, ae)
        candidates = with_sequence(environment.candidates, environment.sequence)
        decision = choose(candidates, local)
        if decision.chosen is None:
            raise Conflict(f"{ae}: {decision.reason}", code="put_inhibited", application_environment=ae)
        weight = next(c.weight for c in candidates if c.node == decision.chosen)
        environment.sequence = after_choice(environment.sequence, decision.chosen, weight, count)
        return decision.chosen


def count_routed(ae: str, node: str, how: str, count: int) -> None:
    """Requests queued on `node`; `how`: named (the request named it) or algorithm."""
    ROUTED.labels(ae, node, how).inc(count)


async def nodes(router: Router, policy: ActivePolicy) -> list[NodeAttributes]:
    overrides = await router.store.overrides()
    servers = await router.store.node_activity(policy)
    return [
        NodeAttributes(node, node_routing(policy, node, overrides), link_state(node, servers, overrides), overrides.get((node, NODE_ITSELF), {}))
        for node in policy.nodes
    ]


async def alter(
    session: AsyncSession, store: RoutingStore, policy: ActivePolicy, actor: str, node: str, ae: str, changes: dict[str, Any]
) -> dict[str, Any]:
    """Change the overrides of a node (`ae` empty) or of an environment's instance on it: a value of None takes the
    attribute back to the policy's. Returns the overrides now in force; audited."""
    if not changes:
        raise ValidationFailed([{"path": "", "message": "name at least one attribute to change"}])
    if node not in policy.nodes:
        raise NotFound(f"the active policy has no node {node}", code="unknown_node", node=node)
    if ae and not policy.hosts(ae, node):
        raise NotFound(f"{ae} has no instance on node {node}", code="unknown_instance", node=node, application_environment=ae)
    row = await session.get(RoutingOverride, (node, ae), with_for_update=True)
    attributes = {**(row.attributes if row else {}), **changes}
    attributes = {k: v for k, v in attributes.items() if v is not None}
    if row is None:
        row = RoutingOverride(node=node, application_environment=ae, attributes=attributes, changed_by=actor)
        session.add(row)
    else:
        row.attributes, row.changed_by, row.changed_at = attributes, actor, utcnow()
    record(session, actor, ALTER_ACTION, f"{node}/{ae}" if ae else node, changes=changes, attributes=attributes)
    try:
        await session.commit()
    except IntegrityError as exc:  # another operator's first change of the same node won the insert
        await session.rollback()
        raise Conflict(f"{node} was changed at the same moment; send the change again", code="concurrent_change", node=node) from exc
    store.invalidate()
    return attributes
