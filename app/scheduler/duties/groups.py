"""Resource groups' slots reconciled with the requests in flight, each pass of the lease expiry
(app/queues/resource_groups.py): a request no longer selected or begun (given back when its completion time passed
or its server died or disconnected, abandoned, or ended by a select whose settle was lost with its process) keeps
its slot until this frees it (once it has been held a few passes: the pass reads only those, so work that ends
sooner costs it nothing); a request a select took whose settle was lost is held here, before the select's
reservation, which counted it, lapses (a completion time after the select): each environment's work in flight is
read for it a quarter of the completion time apart, not every pass, since that reads every request in flight."""

from __future__ import annotations

import math
import time

from prometheus_client import Counter

from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys
from app.queues.resource_groups import group_by_class
from app.scheduler.duties.context import DutyContext

FREED = Counter("wlm_resource_group_slots_freed_total", "Slots of requests no longer in flight freed by the scheduler", ["resource_group"])
# A held member is read by the pass once it has been held this many passes (and again each time as many later).
STALE_AFTER_PASSES = 4
HELD = Counter("wlm_resource_group_slots_held_total", "Slots of requests in flight that no group held, now held", ["resource_group"])


class SlotReconciler:
    """The lease expiry pass's part for the resource groups: the stale held members of those held STALE_AFTER_PASSES
    passes or more, the unheld work in flight in each environment a quarter of its completion time apart."""

    def __init__(self, context: DutyContext) -> None:
        self.context = context
        self._scanned_at: dict[AeKeys, float] = {}

    async def reconcile(self, policy: ActivePolicy) -> None:
        queues = self.context.state.queues
        now = time.monotonic()
        for keys, config in await self.context.environments():
            groups = group_by_class(config)
            if not groups or now - self._scanned_at.get(keys, -math.inf) < config.completion_time_ms / 4000:
                continue
            self._scanned_at[keys] = now
            for group, members in (await queues.groups.unheld_members(keys, groups)).items():
                await queues.groups.settle_slots(group, "", 0, members)
                HELD.labels(group.name).inc(len(members))
        # Only members held (or found in flight) a few passes ago are read: work that ends sooner is never read here,
        # and long work once in those passes, not every pass.
        now_ms = await queues.clock_ms()
        before_ms = now_ms - int(self.context.state.settings.lease_check_seconds * 1000 * STALE_AFTER_PASSES)
        for group in policy.resource_groups.values():
            members = await queues.groups.held_members(group.name, before_ms)
            stale = await queues.groups.stale_members(members)
            await queues.groups.found_in_flight(group.name, sorted(set(members) - set(stale)), now_ms)
            if stale:
                await queues.groups.settle_slots(group, "", 0, (), stale)
                FREED.labels(group.name).inc(len(stale))
