"""The cluster workload management algorithm (IBM MQ's: docs/sources.md) choosing the node a work request goes to (pure).

MQ's parts, as this product plays them: an application environment's instance on a node is a cluster queue
instance; a node is a queue manager, reached by one or more links, its channels (each with its NETPRTY and a state
derived from the node's servers, or stopped by an operator); the queue manager connection that inserts the request
is the local queue manager, and the instance on its own node is the local instance, which needs no link.

`choose` applies MQ's steps in their order and says, step by step, which candidate each eliminated and why.
Steps the product has no counterpart for are left out: 1.2, 1.3 and 2 (one cluster, no queue manager aliases),
4 and 12 (cluster PCF messages), 14 (choosing a queue manager rather than a queue). Steps 8 to 11 and 13 act on
links: 8 to 11 keep the links in the best state group (a node left with none is eliminated), 13 keeps, for each
node, its links with the highest NETPRTY, as MQ does for the channels to each queue manager. So NETPRTY never
eliminates a node, and with one link per node it eliminates nothing; it says which link the chosen node is reached by.

The least-recently-used choice (step 17) reads each destination's sequence factor and number; `after_choice`
returns them as they are after a choice, so the caller keeps that state and the function stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from app.policy.schemas import DEFAULT_WEIGHT, MRU_CAP_MAX

# MQ: the chosen destination's sequence factor grows by about 1000 / CLWLWGHT.
SEQUENCE_FACTOR_STEP = 1000.0


class UseQueue(StrEnum):
    """CLWLUSEQ. An instance says LOCAL, ANY, or QMGR (follow the node's setting, which is LOCAL or ANY)."""

    LOCAL = "LOCAL"
    ANY = "ANY"
    QMGR = "QMGR"


class LinkState(StrEnum):
    """MQ's channel states (MQCHS_*) as the state of the link to a node."""

    INACTIVE = "inactive"
    RUNNING = "running"
    BINDING = "binding"
    INITIALIZING = "initializing"
    STARTING = "starting"
    STOPPING = "stopping"
    RETRYING = "retrying"
    REQUESTING = "requesting"
    PAUSED = "paused"
    STOPPED = "stopped"


# Steps 8 to 11: the states a link may be in to be used, best group first; a later group is used only when no
# candidate is in an earlier one.
LINK_STATE_GROUPS: tuple[frozenset[LinkState], ...] = (
    frozenset({LinkState.INACTIVE, LinkState.RUNNING}),
    frozenset({LinkState.BINDING, LinkState.INITIALIZING, LinkState.STARTING, LinkState.STOPPING}),
    frozenset({LinkState.RETRYING}),
    frozenset({LinkState.REQUESTING, LinkState.PAUSED, LinkState.STOPPED}),
)


@dataclass(frozen=True, slots=True)
class Link:
    """A link to a node (a cluster channel to its queue manager)."""

    name: str
    network_priority: int = 0  # NETPRTY
    state: LinkState = LinkState.INACTIVE


@dataclass(frozen=True, slots=True)
class Candidate:
    """One node's instance of the application environment, with the attributes the algorithm reads."""

    node: str
    # The instance (the cluster queue).
    put_enabled: bool = True
    rank: int = 0
    priority: int = 0
    use_queue: UseQueue = UseQueue.QMGR
    # The node and its links (the queue manager and its channels), in the policy's order; by default one, unnamed.
    link_rank: int = 0
    suspended: bool = False
    links: tuple[Link, ...] = (Link(""),)
    weight: int = DEFAULT_WEIGHT
    # The choice state (MQWDR.DestSeqFactor and DestSeqNumber): higher number, more recently used.
    sequence_factor: float = 0.0
    sequence_number: int = 0


@dataclass(frozen=True, slots=True)
class Elimination:
    """A node eliminated, or only one of its links (`link` named) while the node stays."""

    node: str
    reason: str
    link: str | None = None


@dataclass(frozen=True, slots=True)
class StepResult:
    step: str  # MQ's step number (docs/routing.md)
    rule: str
    eliminated: tuple[Elimination, ...]
    remaining: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """The chosen node (None when no instance is put enabled), the link it is reached by (None for the local
    instance, which needs none), and the trace of the steps that ran."""

    chosen: str | None
    steps: tuple[StepResult, ...]
    reason: str
    link: str | None = None


@dataclass(frozen=True, slots=True)
class LocalQueueManager:
    """Who inserts: the node of the queue manager (None: it is on no node hosting the environment), that node's
    CLWLUSEQ (LOCAL or ANY) and its CLWLMRUC."""

    node: str | None = None
    use_queue: UseQueue = UseQueue.LOCAL
    most_recently_used_cap: int = MRU_CAP_MAX


class _Trace:
    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.remaining = list(candidates)
        self.steps: list[StepResult] = []

    def keep(
        self, step: str, rule: str, kept: Callable[[Candidate], bool], why: Callable[[Candidate], str], *, may_empty: bool = False
    ) -> None:
        """Eliminate the candidates `kept` says no to, naming `why`; unless `may_empty` (put enabled), a step that
        would leave none is recorded as eliminating nothing (MQ's steps narrow a choice, they never empty it)."""
        survivors = [c for c in self.remaining if kept(c)]
        if (not survivors and not may_empty) or len(survivors) == len(self.remaining):
            survivors = self.remaining
        eliminated = tuple(Elimination(c.node, why(c)) for c in self.remaining if c not in survivors)
        self.remaining = survivors
        self.steps.append(StepResult(step, rule, eliminated, tuple(c.node for c in survivors)))

    def skip(self, step: str, rule: str) -> None:
        """A step whose condition does not hold: recorded, eliminating nothing."""
        self.steps.append(StepResult(step, rule, (), tuple(c.node for c in self.remaining)))

    def keep_highest(
        self, step: str, rule: str, label: str, value: Callable[[Candidate], int], exempt: Callable[[Candidate], bool]
    ) -> None:
        """Eliminate the candidates whose `value` is below the highest among those not `exempt` (which stay)."""
        top = max((value(c) for c in self.remaining if not exempt(c)), default=0)
        self.keep(step, rule, lambda c: exempt(c) or value(c) == top, lambda c: f"{label} {value(c)} < {top}")

    def keep_links(
        self,
        step: str,
        rule: str,
        kept: Callable[[Candidate, Link], bool],
        why: Callable[[Candidate, Link], str],
        exempt: Callable[[Candidate], bool],
    ) -> None:
        """Eliminate the links `kept` says no to, naming `why`; a candidate left with no link is eliminated, with its
        links' reasons. The links of an `exempt` candidate (the local instance, which uses none) all stay."""
        survivors: list[Candidate] = []
        eliminated: list[Elimination] = []
        for candidate in self.remaining:
            links = candidate.links if exempt(candidate) else tuple(link for link in candidate.links if kept(candidate, link))
            if not links:
                if len(candidate.links) == 1:
                    reason = why(candidate, candidate.links[0])
                else:
                    reason = "; ".join(f"{link.name}: {why(candidate, link)}" for link in candidate.links)
                eliminated.append(Elimination(candidate.node, reason))
                continue
            eliminated += [Elimination(candidate.node, why(candidate, link), link.name) for link in candidate.links if link not in links]
            survivors.append(replace(candidate, links=links))
        self.remaining = survivors
        self.steps.append(StepResult(step, rule, tuple(eliminated), tuple(c.node for c in survivors)))


def _uses_local_instance(instance: Candidate, local: LocalQueueManager) -> bool:
    return instance.use_queue is UseQueue.LOCAL or (instance.use_queue is UseQueue.QMGR and local.use_queue is UseQueue.LOCAL)


def link_state_group(state: LinkState) -> int:
    """The index of the group of steps 8 to 11 that `state` is in: 0 is the best."""
    return next(i for i, group in enumerate(LINK_STATE_GROUPS) if state in group)


def _highest_network_priority(candidate: Candidate) -> int:
    return max(link.network_priority for link in candidate.links)


def _tie_explained(candidate: Candidate, chosen: Candidate) -> str:
    """Why step 17 passed over `candidate` for `chosen`: a higher factor, the same factor and a later use, or a full
    tie (as when neither was used yet), which the order of the candidates breaks."""
    if candidate.sequence_factor != chosen.sequence_factor:
        return f"sequence factor {candidate.sequence_factor:g} > {chosen.sequence_factor:g}"
    if candidate.sequence_number != chosen.sequence_number:
        numbers = f"{candidate.sequence_number} > {chosen.sequence_number}"
        return f"equal sequence factor {candidate.sequence_factor:g}, used more recently (number {numbers})"
    tie = f"sequence factor {candidate.sequence_factor:g}, number {candidate.sequence_number}"
    return f"a tie ({tie}) broken by order: {chosen.node} comes first"


def choose(candidates: Sequence[Candidate], local: LocalQueueManager = LocalQueueManager()) -> Decision:
    """The node for one work request among `candidates` (the environment's instances, in the policy's node order)."""
    trace = _Trace(candidates)
    trace.keep(
        "1.1", "instances that are not put enabled are eliminated", lambda c: c.put_enabled, lambda c: "put disabled", may_empty=True
    )
    if not trace.remaining:
        return Decision(None, tuple(trace.steps), "no instance of the application environment is put enabled")

    local_instance = next((c for c in trace.remaining if c.node == local.node), None)
    if local_instance is not None and _uses_local_instance(local_instance, local):
        how = "CLWLUSEQ LOCAL" if local_instance.use_queue is UseQueue.LOCAL else "CLWLUSEQ QMGR and the node's CLWLUSEQ LOCAL"
        trace.keep(
            "3",
            "the local instance is used",
            lambda c: c is local_instance,
            lambda c: f"the local instance on {local.node} is used ({how})",
        )
    else:
        trace.skip("3", "the local instance is used")

    def local_instance_has_no_link(c: Candidate) -> bool:
        return c.node == local.node

    def none_exempt(c: Candidate) -> bool:
        return False

    trace.keep_highest(
        "5", "links with a CLWLRANK below the highest are eliminated", "link CLWLRANK", lambda c: c.link_rank, local_instance_has_no_link
    )
    trace.keep_highest(
        "6", "instances with a CLWLRANK below the highest are eliminated", "instance CLWLRANK", lambda c: c.rank, none_exempt
    )
    if not any(c.node == local.node for c in trace.remaining):
        trace.keep("7", "resumed nodes are preferred to suspended ones", lambda c: not c.suspended, lambda c: "node suspended")
    else:
        trace.skip("7", "resumed nodes are preferred to suspended ones")
    # The local instance needs no link: it counts as the best group.
    best_group = min(0 if local_instance_has_no_link(c) else min(link_state_group(link.state) for link in c.links) for c in trace.remaining)
    trace.keep_links(
        "8-11",
        "links in the best state group are used (inactive or running; then starting; then retrying; then stopped)",
        lambda c, link: link_state_group(link.state) == best_group,
        lambda c, link: f"link {link.state}",
        local_instance_has_no_link,
    )
    trace.keep_links(
        "13",
        "each node's links with a NETPRTY below the node's highest are eliminated",
        lambda c, link: link.network_priority == _highest_network_priority(c),
        lambda c, link: f"link NETPRTY {link.network_priority} < {_highest_network_priority(c)}",
        local_instance_has_no_link,
    )
    trace.keep_highest(
        "15", "instances with a CLWLPRTY below the highest are eliminated", "instance CLWLPRTY", lambda c: c.priority, none_exempt
    )
    most_recent = sorted(trace.remaining, key=lambda c: c.sequence_number, reverse=True)[: local.most_recently_used_cap]
    trace.keep(
        "16",
        f"all but the {local.most_recently_used_cap} most recently used (CLWLMRUC) are eliminated",
        lambda c: c in most_recent,
        lambda c: f"not among the {local.most_recently_used_cap} most recently used",
    )
    # min() keeps the first of equals: a full tie goes to the candidate first in order.
    chosen = min(trace.remaining, key=lambda c: (c.sequence_factor, c.sequence_number))
    trace.keep(
        "17",
        "the least recently used is chosen (lowest sequence factor, then lowest sequence number, then first in order)",
        lambda c: c is chosen,
        lambda c: _tie_explained(c, chosen),
    )
    # Links that tie after step 13 are equally good: the first in the policy's order is named.
    link = None if local_instance_has_no_link(chosen) else chosen.links[0].name
    return Decision(chosen.node, tuple(trace.steps), f"{chosen.node} chosen", link)


@dataclass(frozen=True, slots=True)
class SequenceState:
    """Per destination node: (sequence factor, sequence number); `counter` is the latest number given out."""

    factors: Mapping[str, float]
    numbers: Mapping[str, int]
    counter: int = 0


def after_choice(state: SequenceState, node: str, weight: int, count: int = 1) -> SequenceState:
    """The state after `count` requests went to `node`: its factor grows by 1000/weight for each, and it becomes the
    most recently used."""
    factors = dict(state.factors)
    factors[node] = factors.get(node, 0.0) + count * SEQUENCE_FACTOR_STEP / weight
    counter = state.counter + 1
    return SequenceState(factors, dict(state.numbers) | {node: counter}, counter)


def with_sequence(candidates: Sequence[Candidate], state: SequenceState) -> list[Candidate]:
    return [replace(c, sequence_factor=state.factors.get(c.node, 0.0), sequence_number=state.numbers.get(c.node, 0)) for c in candidates]
