"""Resource groups' slots reconciled with the requests in flight, each pass of the lease expiry
(app/queues/resource_groups.py): a request no longer selected or begun (given back when its completion time passed
or its server died or disconnected, abandoned, or ended by a select whose settle was lost with its process) keeps
its slot until this frees it; a request a select took whose settle was lost is held here, before the select's
reservation, which counted it, lapses (a completion time after the select)."""

from __future__ import annotations

from prometheus_client import Counter

from app.policy.active import ActivePolicy
from app.queues.resource_groups import group_by_class
from app.scheduler.duties.context import DutyContext

FREED = Counter("wlm_resource_group_slots_freed_total", "Slots of requests no longer in flight freed by the scheduler", ["resource_group"])
HELD = Counter("wlm_resource_group_slots_held_total", "Slots of requests in flight that no group held, now held", ["resource_group"])


async def reconcile_slots(context: DutyContext, policy: ActivePolicy) -> None:
    queues = context.state.queues
    for keys, config in await context.environments():
        if groups := group_by_class(config):
            for group, members in (await queues.groups.unheld_members(keys, groups)).items():
                await queues.groups.settle_slots(group, "", 0, members)
                HELD.labels(group.name).inc(len(members))
    for group in policy.resource_groups.values():
        stale = await queues.groups.stale_members(await queues.groups.held_members(group.name))
        if stale:
            await queues.groups.settle_slots(group, "", 0, (), stale)
            FREED.labels(group.name).inc(len(stale))
