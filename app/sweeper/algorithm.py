"""The slow queue sweeper's decision (after TPF MQSeries': docs/sources.md), with no I/O.

Every interval the sweeper looks at each queue: its service rate x is how many requests were selected from it in
the last interval, y how many it holds in memory (front and rear lists). When y > 2x the queue is swept: all but a
buffer of x + 5 requests at its front move to the database, so the next selects do not bring them straight back.
"""

from __future__ import annotations

from dataclasses import dataclass

SWEEP_FACTOR = 2  # swept when more than twice the service rate is in memory
BUFFER_EXTRA = 5  # the buffer kept in memory: the service rate plus this


@dataclass(frozen=True, slots=True)
class SweepPlan:
    keep: int  # requests left at the front of the queue (the buffer)
    front: int  # requests of the front list to move out: its tail beyond the buffer, chained before the swept part
    rear: int  # requests of the rear list to move out: all of it, chained after the swept part


def service_rate(selected: int, elapsed_s: float, interval_s: float) -> int:
    """Requests selected per interval, from a count over `elapsed_s` (a pass that came late counts a longer time)."""
    if elapsed_s <= interval_s:
        return selected
    return round(selected * interval_s / elapsed_s)


def plan_sweep(rate: int, front: int, rear: int, *, chained: bool, min_in_memory: int = 0) -> SweepPlan | None:
    """What to move out of a queue with `front` and `rear` requests in memory and `rate` selected per interval;
    `chained`: part of it is in the database already (its rear lies behind that part). None: leave it alone.

    A queue with fewer than `min_in_memory` requests in memory is left alone whatever its rate (a setting of this
    product: a trip to the database is not worth a handful of requests). The rear can only be moved from its head,
    to the end of the chain; without a chain it lies right behind the front, so it moves only when the front
    fills the buffer by itself."""
    in_memory = front + rear
    if in_memory <= SWEEP_FACTOR * rate or in_memory < min_in_memory:
        return None
    keep = rate + BUFFER_EXTRA
    plan = SweepPlan(keep, max(0, front - keep), rear if chained or front >= keep else 0)
    return plan if plan.front or plan.rear else None
