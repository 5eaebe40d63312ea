"""Environments that left the policy with work in them (a departed queue manager's dynamic ones) are finished
here, in the scheduler's lease pass: expired leases end as usual (given back, then abandoned), queued work that a
stale cache let in after the departure is purged, and once nothing is left and no cache can still let work in, the
environment is forgotten."""

from __future__ import annotations

from app.connections.departures import expire_silent_servers, purge_departed_again
from app.policy.active import ActivePolicy
from app.scheduler.duties.context import DutyContext


async def finish_departed(context: DutyContext, policy: ActivePolicy) -> None:
    state = context.state
    queues, settle_ms = state.queues, int(2 * state.settings.connection_cache_seconds * 1000) + 1000
    await purge_departed_again(queues, policy)
    for retired in await queues.environments.retired():
        await expire_silent_servers(
            state.sessions, queues, state.connection_cache, policy, retired.keys, state.settings.heartbeat_timeout_seconds
        )
        await queues.reassign(retired.keys, retired.config)
        await queues.purge(retired.keys, retired.queue_manager)
        if await queues.clock_ms() - retired.since_ms > settle_ms and await queues.environments.drained(retired.keys):
            await queues.environments.forget_retired(retired)
