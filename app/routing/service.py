"""Routing a work request to a node: the candidates' attributes (policy, then operators' overrides), the links'
states, and each process's sequence state for the algorithm's least-recently-used choice.

The sequence factors are this process's, as in MQ they are each queue manager's own: with several replicas each
keeps its own, and each one's share of the requests follows the weights. They are reset, as MQ says, when the
workload attributes of an environment's nodes or links change or a link joins (comes into the best state group).

A node has the links its policy entry lists, or one named as the node. Link states come from what the service sees
of a node: STOPPED when an operator stopped the link (or all the node's links); otherwise RUNNING while servers of
any environment are connected there; RETRYING when none are and some ended unexpectedly within the last ten minutes
(the STOPPED rule's window); INACTIVE when none are (work still queues there, as a message on an inactive channel
starts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from prometheus_client import Counter
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import record
from app.db import utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.operator.states import UNEXPECTED_TERMINATION_WINDOW_S
from app.policy.active import ActivePolicy
from app.policy.schemas import InstanceRouting, Node, NodeLink, NodeRouting
from app.queues.store import QueueStore
from app.routing.algorithm import (
    LINK_STATE_GROUPS,
    Candidate,
    Decision,
    Link,
    LinkState,
    LocalQueueManager,
    SequenceState,
    UseQueue,
    after_choice,
    choose,
    link_state_group,
    with_sequence,
)
from app.routing.models import NODE_ITSELF, RoutingOverride
from app.shared.generation import GatedValue, Generations, count_change
from app.shared.ttl_cache import TtlCache

ROUTED = Counter("wlm_routed_requests_total", "Work requests routed to a node", ["application_environment", "node", "how"])
ALTER_ACTION = "routing.alter"
LINK_STOPPED = "link_stopped"
# In a node's overrides: what operators changed of each of its links, {link: {attribute: value}}.
LINKS = "links"
# How often a process looks again at which nodes have servers.
LINK_STATE_SECONDS = 1.0

Overrides = Mapping[tuple[str, str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class NodeAttributes:
    node: str
    routing: NodeRouting
    links: tuple[Link, ...]
    overridden: Mapping[str, Any]

    @property
    def link(self) -> LinkState:
        """The state of its best link, as one word for the node."""
        return min((link.state for link in self.links), key=link_state_group)


@dataclass(frozen=True, slots=True)
class NodeActivity:
    servers: int
    recent_terminations: int


class RoutingStore:
    """Operators' overrides (database, cached like the AE states) and the links' states (Redis, cached briefly)."""

    def __init__(self, generations: Generations, queues: QueueStore) -> None:
        self.queues = queues
        self._overrides: GatedValue[Overrides] = GatedValue(generations, self._load_overrides)
        self._links: TtlCache[Mapping[str, NodeActivity]] = TtlCache(LINK_STATE_SECONDS)

    async def overrides(self) -> Overrides:
        return await self._overrides.get()

    @staticmethod
    async def _load_overrides(session: AsyncSession) -> Overrides:
        rows = await session.scalars(select(RoutingOverride))
        return MappingProxyType({(row.node, row.application_environment): MappingProxyType(row.attributes) for row in rows})

    async def node_activity(self, policy: ActivePolicy) -> Mapping[str, NodeActivity]:
        """Per node: servers connected, and unexpected server terminations within the STOPPED rule's window."""

        async def load() -> Mapping[str, NodeActivity]:
            since = await self.queues.clock_ms() - int(UNEXPECTED_TERMINATION_WINDOW_S * 1000)
            places = [(node, ae) for node in policy.nodes for ae in policy.application_environments if policy.hosts(ae, node)]
            counts = dict.fromkeys(policy.nodes, (0, 0))
            activity = await self.queues.environments.activity([self.queues.keys(node, ae) for node, ae in places], since)
            for (node, _), (servers, terminations) in zip(places, activity, strict=True):
                counts[node] = (counts[node][0] + servers, counts[node][1] + terminations)
            return MappingProxyType({node: NodeActivity(*count) for node, count in counts.items()})

        return await self._links.get_or_load(f"v{policy.version}:{len(policy.application_environments)}", load)

    def invalidate(self) -> None:
        self._overrides.clear()
        self._links.clear()


def _defined(policy: ActivePolicy, node: str) -> Node | None:
    return next((n for n in policy.definition.nodes if n.name == node), None)


def node_routing(policy: ActivePolicy, node: str, overrides: Overrides) -> NodeRouting:
    defined = _defined(policy, node)
    base = NodeRouting.model_validate(defined.model_dump(include=set(NodeRouting.model_fields))) if defined else NodeRouting()
    changed = {k: v for k, v in overrides.get((node, NODE_ITSELF), {}).items() if k in NodeRouting.model_fields}
    return base.model_copy(update=changed)


def instance_routing(policy: ActivePolicy, ae: str, node: str, overrides: Overrides) -> InstanceRouting:
    environment = policy.application_environments[ae]
    base = environment.instances.get(node, InstanceRouting())
    return base.model_copy(update=dict(overrides.get((node, ae), {})))


def defined_links(policy: ActivePolicy, node: str) -> list[NodeLink]:
    """The node's links in the policy; a node that lists none has one, named as the node."""
    defined = _defined(policy, node)
    return list(defined.links) if defined is not None and defined.links else [NodeLink(name=node)]


def node_links(
    policy: ActivePolicy, node: str, routing: NodeRouting, activity: Mapping[str, NodeActivity], overrides: Overrides
) -> tuple[Link, ...]:
    """The node's links with their NETPRTY (an operator's change of the link, else the policy's, else the node's) and
    their states."""
    changed = overrides.get((node, NODE_ITSELF), {})
    derived = _derived_state(node, activity)
    links = []
    for defined in defined_links(policy, node):
        own = changed.get(LINKS, {}).get(defined.name, {})
        network_priority = own.get("network_priority", defined.network_priority)
        stopped = changed.get(LINK_STOPPED) or own.get("stopped")
        links.append(
            Link(
                defined.name,
                routing.network_priority if network_priority is None else network_priority,
                LinkState.STOPPED if stopped else derived,
            )
        )
    return tuple(links)


def _derived_state(node: str, activity: Mapping[str, NodeActivity]) -> LinkState:
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
    _sole_decisions: dict[LocalQueueManager, Decision] = field(default_factory=dict)

    def decision(self, local: LocalQueueManager) -> tuple[Decision, list[Candidate]]:
        """The algorithm's choice as the sequence stands, and the candidates it chose among. An environment on one
        node (the common case, and every insert's) needs the steps worked out once per local queue manager: the
        sequence decides nothing among one (no step leaves none, and the least recently used of one is that one)."""
        candidates = with_sequence(self.candidates, self.sequence)
        if len(candidates) != 1:
            return choose(candidates, local), candidates
        decision = self._sole_decisions.get(local)
        if decision is None:
            decision = self._sole_decisions[local] = choose(candidates, local)
        return decision, candidates


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
                    links=node_links(policy, node, routing, activity, overrides),
                    weight=routing.weight,
                )
            )
        # Every routing attribute of the nodes and their links, and which links are usable: a change of either (an
        # attribute altered, a node or link joining or coming back) resets the sequence factors, so no node is
        # flooded to catch up.
        links = [(c.node, link) for c in candidates for link in c.links]
        fingerprint = (
            tuple(attributes),
            tuple((node, link.name, link.network_priority) for node, link in links),
            tuple((node, link.name) for node, link in links if link.state in LINK_STATE_GROUPS[0]),
        )
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
        return environment.decision(local)

    async def route(self, policy: ActivePolicy, ae: str, queue_manager_node: str | None, count: int = 1) -> str:
        """The node for `count` requests inserted together (one decision, like MQ's bind on open). The choice and
        the sequence's step are made together, with no wait between, so concurrent inserts take turns."""
        local = await self._local(policy, queue_manager_node)
        environment = await self._environment(policy, ae)
        decision, candidates = environment.decision(local)
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
    listed = []
    for node in policy.nodes:
        routing = node_routing(policy, node, overrides)
        links = node_links(policy, node, routing, servers, overrides)
        listed.append(NodeAttributes(node, routing, links, overrides.get((node, NODE_ITSELF), {})))
    return listed


def _changed(attributes: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`attributes` with `changes` made, where a None takes an attribute away."""
    return {k: v for k, v in {**attributes, **changes}.items() if v is not None}


async def alter(
    session: AsyncSession,
    store: RoutingStore,
    policy: ActivePolicy,
    actor: str,
    node: str,
    ae: str,
    changes: dict[str, Any],
    link: str = "",
) -> dict[str, Any]:
    """Change the overrides of a node (`ae` empty), of one of its links (`link` named) or of an environment's
    instance on it: a value of None takes the attribute back to the policy's. Returns the overrides now in force
    (the node's, with its links'); audited."""
    if not changes:
        raise ValidationFailed([{"path": "", "message": "name at least one attribute to change"}])
    if node not in policy.nodes:
        raise NotFound(f"the active policy has no node {node}", code="unknown_node", node=node)
    if ae and not policy.hosts(ae, node):
        raise NotFound(f"{ae} has no instance on node {node}", code="unknown_instance", node=node, application_environment=ae)
    if link and link not in {defined.name for defined in defined_links(policy, node)}:
        raise NotFound(f"node {node} has no link {link}", code="unknown_link", node=node, link=link)
    row = await session.get(RoutingOverride, (node, ae), with_for_update=True)
    current = row.attributes if row else {}
    if link:
        links = dict(current.get(LINKS, {}))
        links[link] = _changed(links.get(link, {}), changes)
        # A link with nothing changed any more leaves no trace, nor does LINKS when no link has.
        attributes = _changed(current, {LINKS: {name: changed for name, changed in links.items() if changed} or None})
    else:
        attributes = _changed(current, changes)
    if row is None:
        row = RoutingOverride(node=node, application_environment=ae, attributes=attributes, changed_by=actor)
        session.add(row)
    else:
        row.attributes, row.changed_by, row.changed_at = attributes, actor, utcnow()
    target = f"{node}/{ae}" if ae else f"{node} link {link}" if link else node
    record(session, actor, ALTER_ACTION, target, changes=changes, attributes=attributes)
    try:
        await count_change(session)
        await session.commit()
    except IntegrityError as exc:  # another operator's first change of the same node won the insert
        await session.rollback()
        raise Conflict(f"{node} was changed at the same moment; send the change again", code="concurrent_change", node=node) from exc
    store.invalidate()
    return attributes
