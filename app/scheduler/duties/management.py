"""Management to goals, every WLM_GOAL_INTERVAL_SECONDS: each service class judged against its goal over the goal
window (app.servers.performance), then the servers of each environment decided (app.servers.service; the launcher and autoscalers act on the
decision). One process at a time judges and decides, under a lease, as the results are shared in Redis."""

from __future__ import annotations

import logging

from app.errors import UNAVAILABLE
from app.policy.active import bucket_specs
from app.scheduler.duties.context import DutyContext
from app.servers.delay_samples import DelayBook
from app.servers.performance import evaluate_environment
from app.servers.service import manage_environment
from app.shared.repeated_failures import RepeatedFailures

log = logging.getLogger(__name__)


class GoalManagement:
    def __init__(self, context: DutyContext, delays: DelayBook | None = None) -> None:
        """`delays`: the scheduler's delay samples, whose shares over the window each evaluation shows."""
        self.context = context
        self.delays = delays
        self._unmanaged = RepeatedFailures(log)  # environments the manager loop could not judge or decide for

    async def manage_to_goals(self) -> None:
        state = self.context.state
        policy = await state.policies.current()
        if policy is None:
            return
        # The lease outlives a few passes, so a scheduler that pauses briefly keeps it rather than handing it over.
        lease_ms = int(max(3 * state.settings.goal_interval_seconds, 10) * 1000)
        if not await state.leases.hold(f"{state.settings.redis_prefix}:manager", self.context.owner, lease_ms):
            return
        window = state.settings.goal_window_seconds
        specs = bucket_specs(policy)
        for keys, _ in await self.context.environments():
            # Each environment on its own: one that fails is logged once, and the others are still managed.
            where = f"managing {keys.ae} on {keys.node} to its goals"
            try:
                await state.queues.results.publish_buckets(keys, specs)  # again, should Redis have lost them
                judged = await evaluate_environment(state.queues, policy, keys, window, self.delays)
                await manage_environment(
                    state.queues, policy, keys, judged, state.settings.goal_interval_seconds, launching=state.settings.launcher
                )
            except UNAVAILABLE:
                raise  # an outage stops the whole pass: the duty loop reports it and tries again
            except Exception as exc:  # noqa: BLE001 - a defect in one environment's figures must not stop the others
                self._unmanaged.failed(where, type(exc).__name__, str(exc), exc)
            else:
                self._unmanaged.succeeded(where)
