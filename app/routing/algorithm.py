"""The cluster workload management algorithm (IBM MQ, seed 000) choosing the node a work request goes to (pure).

The seed's parts, as this product plays them: an application environment's instance on a node is a cluster queue
instance; the link to a node is a channel (its state derived from the node's servers, or stopped by an operator);
the queue manager connection that inserts the request is the local queue manager, and the instance on its own node
is the local instance, which needs no link.

`choose` applies the seed's steps in its order and says, step by step, which candidate each eliminated and why.
Steps the product has no counterpart for are left out: 1.2, 1.3 and 2 (one cluster, no queue manager aliases),
4 and 12 (cluster PCF messages), 14 (choosing a queue manager rather than a queue). The seed applies NETPRTY
(step 13) among the channels to one queue manager; a node has one link, so here it ranks the links of different
nodes, which is what operators set it for.

The least-recently-used choice (step 17) reads each destination's sequence factor and number; `after_choice`
returns them as they are after a choice, so the caller keeps that state and the function stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

DEFAULT_WEIGHT = 50  # CLWLWGHT
MRU_CAP_MAX = 999_999_999  # CLWLMRUC's largest value and its default: every channel may be used
# The seed: the chosen destination's sequence factor grows by about 1000 / CLWLWGHT.
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
class Candidate:
    """One node's instance of the application environment, with the attributes the algorithm reads."""

    node: str
    # The instance (the cluster queue).
    put_enabled: bool = True
    rank: int = 0
    priority: int = 0
    use_queue: UseQueue = UseQueue.QMGR
    # The node and its link (the queue manager and its channel).
    link_rank: int = 0
    suspended: bool = False
    link: LinkState = LinkState.INACTIVE
    network_priority: int = 0
    weight: int = DEFAULT_WEIGHT
    # The choice state (MQWDR.DestSeqFactor and DestSeqNumber): higher number, more recently used.
    sequence_factor: float = 0.0
    sequence_number: int = 0


@dataclass(frozen=True, slots=True)
class Elimination:
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class StepResult:
    step: str  # the seed's step number
    rule: str
    eliminated: tuple[Elimination, ...]
    remaining: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """The chosen node (None when no instance is put enabled) and the trace of the steps that ran."""

    chosen: str | None
    steps: tuple[StepResult, ...]
    reason: str


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
        would leave none is recorded as eliminating nothing (the seed's steps narrow a choice, they never empty it)."""
        survivors = [c for c in self.remaining if kept(c)]
        if (not survivors and not may_empty) or len(survivors) == len(self.remaining):
            survivors = self.remaining
        eliminated = tuple(Elimination(c.node, why(c)) for c in self.remaining if c not in survivors)
        self.remaining = survivors
        self.steps.append(StepResult(step, rule, eliminated, tuple(c.node for c in survivors)))

    def skip(self, step: str, rule: str) -> None:
        """A step whose condition does not hold: recorded, eliminating nothing."""
        self.steps.append(StepResult(step, rule, (), tuple(c.node for c in self.remaining)))

    def keep_highest(self, step: str, rule: str, label: str, value: Callable[[Candidate], int], exempt: Callable[[Candidate], bool]) -> None:
        """Eliminate the candidates whose `value` is below the highest among those not `exempt` (which stay)."""
        top = max((value(c) for c in self.remaining if not exempt(c)), default=0)
        self.keep(step, rule, lambda c: exempt(c) or value(c) == top, lambda c: f"{label} {value(c)} < {top}")


def _uses_local_instance(instance: Candidate, local: LocalQueueManager) -> bool:
    return instance.use_queue is UseQueue.LOCAL or (instance.use_queue is UseQueue.QMGR and local.use_queue is UseQueue.LOCAL)


def _link_group(candidate: Candidate, local: LocalQueueManager) -> int:
    # The local instance needs no link: it is always in the best group.
    if candidate.node == local.node:
        return 0
    return next(i for i, group in enumerate(LINK_STATE_GROUPS) if candidate.link in group)


def choose(candidates: Sequence[Candidate], local: LocalQueueManager = LocalQueueManager()) -> Decision:
    """The node for one work request among `candidates` (the environment's instances, in the policy's node order)."""
    trace = _Trace(candidates)
    trace.keep("1.1", "instances that are not put enabled are eliminated", lambda c: c.put_enabled, lambda c: "put disabled", may_empty=True)
    if not trace.remaining:
        return Decision(None, tuple(trace.steps), "no instance of the application environment is put enabled")

    local_instance = next((c for c in trace.remaining if c.node == local.node), None)
    if local_instance is not None and _uses_local_instance(local_instance, local):
        how = "CLWLUSEQ LOCAL" if local_instance.use_queue is UseQueue.LOCAL else "CLWLUSEQ QMGR and the node's CLWLUSEQ LOCAL"
        trace.keep("3", "the local instance is used", lambda c: c is local_instance, lambda c: f"the local instance on {local.node} is used ({how})")
    else:
        trace.skip("3", "the local instance is used")

    def local_instance_has_no_link(c: Candidate) -> bool:
        return c.node == local.node

    def none_exempt(c: Candidate) -> bool:
        return False

    trace.keep_highest("5", "links with a CLWLRANK below the highest are eliminated", "link CLWLRANK", lambda c: c.link_rank, local_instance_has_no_link)
    trace.keep_highest("6", "instances with a CLWLRANK below the highest are eliminated", "instance CLWLRANK", lambda c: c.rank, none_exempt)
    if not any(c.node == local.node for c in trace.remaining):
        trace.keep("7", "resumed nodes are preferred to suspended ones", lambda c: not c.suspended, lambda c: "node suspended")
    else:
        trace.skip("7", "resumed nodes are preferred to suspended ones")
    best_group = min(_link_group(c, local) for c in trace.remaining)
    trace.keep(
        "8-11",
        "links in the best state group are used (inactive or running; then starting; then retrying; then stopped)",
        lambda c: _link_group(c, local) == best_group,
        lambda c: f"link {c.link}",
    )
    trace.keep_highest("13", "links with a NETPRTY below the highest are eliminated", "link NETPRTY", lambda c: c.network_priority, local_instance_has_no_link)
    trace.keep_highest("15", "instances with a CLWLPRTY below the highest are eliminated", "instance CLWLPRTY", lambda c: c.priority, none_exempt)
    most_recent = sorted(trace.remaining, key=lambda c: c.sequence_number, reverse=True)[: local.most_recently_used_cap]
    trace.keep(
        "16",
        f"all but the {local.most_recently_used_cap} most recently used (CLWLMRUC) are eliminated",
        lambda c: c in most_recent,
        lambda c: f"not among the {local.most_recently_used_cap} most recently used",
    )
    chosen = min(trace.remaining, key=lambda c: (c.sequence_factor, c.sequence_number))
    trace.keep(
        "17",
        "the least recently used is chosen (lowest sequence factor, then lowest sequence number)",
        lambda c: c is chosen,
        lambda c: f"used more recently (sequence factor {c.sequence_factor:g}, number {c.sequence_number})",
    )
    return Decision(chosen.node, tuple(trace.steps), f"{chosen.node} chosen")


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
