"""Resource groups' slots of requests no longer selected or begun freed, each pass of the lease expiry: a request
given back (its completion time passed, its server died or disconnected) or abandoned keeps its slot until this
finds it, as does one whose end's release was lost with its process (app/queues/resource_groups.py)."""

from __future__ import annotations

from prometheus_client import Counter

from app.policy.active import ActivePolicy
from app.scheduler.duties.context import DutyContext

FREED = Counter("wlm_resource_group_slots_freed_total", "Slots of requests no longer in flight freed by the scheduler", ["resource_group"])


async def free_stale_slots(context: DutyContext, policy: ActivePolicy) -> None:
    queues = context.state.queues
    for group in policy.resource_groups.values():
        stale = await queues.groups.stale_members(await queues.groups.held_members(group.name))
        if stale:
            await queues.groups.settle_slots(group, "", 0, (), stale)
            FREED.labels(group.name).inc(len(stale))
