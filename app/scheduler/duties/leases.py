"""Lease expiry, every WLM_LEASE_CHECK_SECONDS: a request whose completion time passed goes back to its queue, or
is abandoned after its last delivery (announced); old tombstones of ended requests are forgotten. The same pass
closes silent servers first (liveness), so their work goes back at once, frees the resource group slots of work no
longer in flight (groups), finishes environments that left the policy (retired) and moves states that waited for
servers to drain (drained).

It runs on the elected scheduler under its epoch: a deposed scheduler's reassignment is refused by the script."""

from __future__ import annotations

from prometheus_client import Counter

from app.events.service import subject
from app.scheduler.duties.context import DutyContext
from app.scheduler.duties.drained import report_drained
from app.scheduler.duties.groups import free_stale_slots
from app.scheduler.duties.liveness import close_silent_servers
from app.scheduler.duties.retired import finish_departed

REASSIGNED = Counter("wlm_work_reassigned_total", "Requests given back after their completion time", ["application_environment"])
ABANDONED = Counter("wlm_work_abandoned_total", "Requests abandoned after their last delivery", ["application_environment"])


class LeaseExpiry:
    def __init__(self, context: DutyContext) -> None:
        self.context = context

    async def expire_leases(self) -> None:
        context, queues = self.context, self.context.state.queues
        policy = await context.state.policies.current()
        if policy is None:
            return
        for keys, config in await context.environments():
            await close_silent_servers(context, policy, keys)
            result = await queues.reassign(keys, config, epoch=context.epoch)
            if result.requeued:
                REASSIGNED.labels(keys.ae).inc(result.requeued)
            if result.abandoned:
                ABANDONED.labels(keys.ae).inc(len(result.abandoned))
                await context.advise(subject("WLM", "WARN", "REQUEST", "ABANDONED", keys.ae), node=keys.node, count=len(result.abandoned))
            await queues.forget_tombstones(keys)
        await free_stale_slots(context, policy)
        await finish_departed(context, policy)
        await report_drained(context, policy)
