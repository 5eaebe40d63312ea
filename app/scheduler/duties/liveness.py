"""Liveness: a server that neither selected nor heartbeat within WLM_HEARTBEAT_TIMEOUT_SECONDS is gone. Its
connection is closed and its work given back; it counts as an unexpected termination (five in ten minutes stop its
environment) and is announced. Part of the scheduler's lease pass, which gives the work back right after."""

from __future__ import annotations

import logging

from prometheus_client import Counter

from app.connections.departures import expire_silent_servers
from app.events.service import subject
from app.operator.service import count_unexpected_terminations
from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys
from app.scheduler.duties.context import DutyContext

log = logging.getLogger(__name__)

SILENT_SERVERS = Counter(
    "wlm_servers_expired_total", "Servers that fell silent (no select or heartbeat in time)", ["application_environment"]
)


async def close_silent_servers(context: DutyContext, policy: ActivePolicy, keys: AeKeys) -> None:
    state = context.state
    silent = await expire_silent_servers(
        state.sessions, state.queues, state.connection_cache, policy, keys, state.settings.heartbeat_timeout_seconds
    )
    if not silent:
        return
    SILENT_SERVERS.labels(keys.ae).inc(len(silent))
    log.warning("%d server(s) of %s on %s fell silent: connections closed, their work given back", len(silent), keys.ae, keys.node)
    await count_unexpected_terminations(state.sessions, state.queues, state.operator, keys, [str(server) for server in silent])
    await context.advise(subject("WLM", "WARN", "SERVER", "STOPPED", keys.ae), node=keys.node, servers=silent, reason="silent")
