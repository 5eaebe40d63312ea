"""Lease expiry, every WLM_LEASE_CHECK_SECONDS: a request whose completion time passed goes back to its queue, or
is abandoned after its last delivery (announced); old tombstones of ended requests are forgotten. The same pass
closes silent servers first (liveness), so their work goes back at once, reconciles the resource groups' slots with
the work in flight (groups), finishes environments that left the policy (retired) and moves states that waited for
servers to drain (drained).

It runs on the elected scheduler under its epoch: a deposed scheduler's reassignment is refused by the script."""

from __future__ import annotations

from prometheus_client import Counter

from app.events.service import subject
from app.policy.active import bucket_specs
from app.queues.keys import AeKeys
from app.scheduler.duties.context import DutyContext
from app.scheduler.duties.drained import report_drained
from app.scheduler.duties.groups import SlotReconciler
from app.scheduler.duties.liveness import close_silent_servers
from app.scheduler.duties.retired import finish_departed

REASSIGNED = Counter("wlm_work_reassigned_total", "Requests given back after their completion time", ["application_environment"])
ABANDONED = Counter("wlm_work_abandoned_total", "Requests abandoned after their last delivery", ["application_environment"])


class LeaseExpiry:
    def __init__(self, context: DutyContext) -> None:
        self.context = context
        # The policy version whose histogram buckets each place has (app.policy.active.bucket_specs): published in
        # the first pass under a new version, so ends are counted at once (the goals pass publishes them again).
        self._buckets_of: dict[AeKeys, int] = {}
        self._slots = SlotReconciler(context)

    async def expire_leases(self) -> None:
        context, queues = self.context, self.context.state.queues
        policy = await context.state.policies.current()
        if policy is None:
            return
        for keys, config in await context.environments():
            if self._buckets_of.get(keys) != policy.version:
                await queues.results.publish_buckets(keys, bucket_specs(policy))
                self._buckets_of[keys] = policy.version
            await close_silent_servers(context, policy, keys)
            result = await queues.reassign(keys, config, epoch=context.epoch)
            if result.requeued:
                REASSIGNED.labels(keys.ae).inc(result.requeued)
            if result.abandoned:
                ABANDONED.labels(keys.ae).inc(len(result.abandoned))
                await context.advise(subject("WLM", "WARN", "REQUEST", "ABANDONED", keys.ae), node=keys.node, count=len(result.abandoned))
            await queues.outbox.forget_tombstones(keys)
        await self._slots.reconcile(policy)
        await finish_departed(context, policy)
        await report_drained(context, policy)
