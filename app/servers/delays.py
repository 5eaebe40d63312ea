"""Why a queued request waits: its delay cause, as RMF's delay samples name one per waiting unit of work (pure).

One cause per waiting request, the first that applies in this order (issue 39): its environment's state holds work
back (quiesced, stopped, refreshing ...); it waits to be delivered again after a failed delivery; its class's
resource group is at its cap; no server of its environment is connected; servers the manager wants are not connected
yet; every worker task is taken, some with work of equal or higher importance; every worker task is taken, with less
important work only. None when none applies: a worker task is free and the request is about to be selected.

A request's own status (app/work/status.py) asks it of the facts it reads; the delay samples of the elected scheduler
(app/scheduler/duties/delay_sampling.py) ask it of each queue's, once for its redelivered requests and once for the
others (`queue_states`): the facts of one queue differ between its waiting requests in that alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class DelayCause(StrEnum):
    ENVIRONMENT_STATE = "environment_state"
    REDELIVERY = "redelivery"
    GROUP_CAP = "group_cap"
    NO_SERVER = "no_server"
    SERVERS_STARTING = "servers_starting"
    BUSY_HIGHER = "busy_higher"
    BUSY_LOWER = "busy_lower"


@dataclass(frozen=True, slots=True)
class DelayFacts:
    """What decides a queued request's delay cause."""

    environment_holds_work: bool  # its environment's state keeps work from starting (app.operator.states)
    delivered_before: bool  # it was selected before and given back (its lease expired, its server went)
    group_at_cap: bool  # its class's resource group has its max in flight
    servers_connected: int  # of its environment, on its node
    servers_wanted: int  # the manager's latest decision for them (0: none made yet)
    free_worker_tasks: int  # of the connected servers
    holding_equal_or_higher: bool  # what the servers hold includes work of equal or higher importance than its own
    holding_lower: bool  # ... work of lower importance


def delay_cause(facts: DelayFacts) -> DelayCause | None:
    """The first cause that applies, in the order of DelayCause; None when a worker task is free."""
    if facts.environment_holds_work:
        return DelayCause.ENVIRONMENT_STATE
    if facts.delivered_before:
        return DelayCause.REDELIVERY
    if facts.group_at_cap:
        return DelayCause.GROUP_CAP
    if facts.servers_connected == 0:
        return DelayCause.NO_SERVER
    if facts.servers_connected < facts.servers_wanted:
        return DelayCause.SERVERS_STARTING
    if facts.free_worker_tasks > 0:
        return None
    if facts.holding_equal_or_higher:
        return DelayCause.BUSY_HIGHER
    if facts.holding_lower:
        return DelayCause.BUSY_LOWER
    return None


# A sampled state with no cause: waiting while a worker task is free (about to be selected), RMF's "unknown".
UNKNOWN = "unknown"
# Every state a sample counts a request in, in the columns' order (spark_jobs/contract/delay_samples.py): served,
# each cause, unknown.
USING = "using"
STATES: tuple[str, ...] = (USING, *(cause.value for cause in DelayCause), UNKNOWN)


def queue_states(facts: DelayFacts, using: int, queued: int, redelivered: int) -> dict[str, int]:
    """One sample of a class queue (pure): its `using` requests served, and its `queued` requests by the state each
    is in, `redelivered` of them given back after a failed delivery. `facts` are the queue's, `delivered_before`
    aside. Only states with a request are named."""
    counts = {USING: using} if using else {}
    redelivered = min(max(redelivered, 0), queued)
    for delivered, count in ((True, redelivered), (False, queued - redelivered)):
        if count > 0:
            cause = delay_cause(replace(facts, delivered_before=delivered))
            state = UNKNOWN if cause is None else cause.value
            counts[state] = counts.get(state, 0) + count
    return counts
