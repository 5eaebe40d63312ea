"""Background duties of the work lifecycle: reassign requests whose completion time passed, flush work
records to Parquet, deliver exit calls, forget old tombstones.

They run on the elected scheduler only (app/scheduler): started when this process takes the role, stopped when
it loses it, and each pass skipped unless the role is still held (`may_act`). The launcher runs on every host
instead (see `Duties.__init__`). Every script they run is atomic and
safe to run from several processes at once, so a moment of overlap at a hand-over is harmless.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial

import httpx
from prometheus_client import Counter
from sqlalchemy import func, select

from app.connections import exit_urls
from app.errors import UNAVAILABLE, Fenced, unavailable_dependency
from app.connections.models import Connection
from app.connections.service import expire_silent_servers, purge_departed_again
from app.operator.service import apply_event, count_unexpected_terminations
from app.operator.states import AEState, InternalEvent
from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys
from app.queues.store import AeConfig
from app.repeated_failures import RepeatedFailures
from app.scheduler.advisories import publish, subject
from app.servers.launcher import Launcher
from app.servers.service import evaluate_environment, manage_environment
from app.state import AppState
from app.sweeper.service import Sweeper
from app.work import exits, records

log = logging.getLogger(__name__)

REASSIGNED = Counter("wlm_work_reassigned_total", "Requests given back after their completion time", ["application_environment"])
ABANDONED = Counter("wlm_work_abandoned_total", "Requests abandoned after their last delivery", ["application_environment"])
SILENT_SERVERS = Counter(
    "wlm_servers_expired_total", "Servers that fell silent (no select or heartbeat in time)", ["application_environment"]
)
RECORDS_WRITTEN = Counter("wlm_work_records_written_total", "Work records written to Parquet")
EXIT_CLAIM_MS = 60_000
FLUSH_AT_STOP_SECONDS = 10.0


class Duties:
    def __init__(self, state: AppState, epoch: int, may_act: Callable[[], bool], owner: str, *, launcher: bool = False) -> None:
        """`epoch`: the scheduler's fencing token these duties act under; `may_act`: whether the role is still held;
        `owner`: this process in the duties' own leases (the same after a re-election, so it finds them its own).
        With `launcher`, only the launcher: it starts servers on this host, for this host's node, under a lease of
        its own per node, so it runs on every host rather than on the scheduler's only."""
        self.state, self.epoch, self.may_act, self._owner = state, epoch, may_act, owner
        self.http = httpx.AsyncClient(timeout=state.settings.exit_timeout_seconds, follow_redirects=False)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._exit_secrets: dict[int, str | None] = {}
        self._unmanaged = RepeatedFailures(log)  # environments the manager loop could not judge or decide for
        self._outages = RepeatedFailures(log)  # duties waiting for Redis or the database
        self._launches = launcher
        self.launcher: Launcher | None = None
        self._periods: dict[int, records.PeriodTable] = {}  # policy versions the records of which were written
        self.sweeper: Sweeper | None = None

    async def start(self) -> None:
        settings = self.state.settings
        if self._launches:
            host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
            self.launcher = Launcher(self.state, settings.node, f"http://{host}:{settings.port}")
            self._tasks.append(asyncio.create_task(self._every(settings.lease_check_seconds, self.launcher.reconcile), name="wlm-duty-launcher"))
            return
        await records.start_writer()
        for name, interval, duty in (
            ("leases", settings.lease_check_seconds, self.expire_leases),
            ("records", settings.records_flush_seconds, self.flush_records),
            ("exits", settings.lease_check_seconds, self.deliver_exits),
            ("goals", settings.goal_interval_seconds, self.manage_to_goals),
            *([("sweeper", settings.sweeper_interval_seconds, self.sweep_queues)] if settings.sweeper_enabled else []),
        ):
            self._tasks.append(asyncio.create_task(self._every(interval, duty), name=f"wlm-duty-{name}"))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # none when starting was cut short
            await asyncio.wait(self._tasks, timeout=10)
        if self.launcher is not None:
            await self.launcher.stop()
        elif self._tasks:  # the scheduler's duties, which had started
            await self._flush_at_stop()
        await self.http.aclose()

    async def _flush_at_stop(self) -> None:
        """Write the records of work ended since the last flush now, so a stopped service's files are complete. Under
        the flush leases, like any flush; what fails stays in the outboxes for the next scheduler."""
        try:
            async with asyncio.timeout(FLUSH_AT_STOP_SECONDS):
                await self.flush_records()
        except Exception as exc:  # noqa: BLE001 - nothing is lost: the outboxes keep what was not written
            log.warning("work records not flushed at stop (%s: %s); the next scheduler writes them", type(exc).__name__, exc)

    async def _advise(self, name: str, **data: object) -> None:
        await publish(self.state.redis, self.state.settings.redis_prefix, name, epoch=self.epoch, **data)

    async def _every(self, interval: float, duty: Callable[[], Awaitable[object]]) -> None:
        # The flag, not only the cancellation: a driver that turns a CancelledError into another error (seen
        # with database calls cancelled mid-flight) must not keep a stopping service's duty alive.
        name = getattr(duty, "__name__", str(duty))
        while not self._stopping:
            try:
                if self.may_act():
                    await duty()
                    self._outages.succeeded(f"background duty {name}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopping:
                    return
                if isinstance(exc, Fenced):
                    # Deposed while paused: the next heartbeat stops these duties.
                    log.warning("scheduler duty %s refused: a newer scheduler acts (epoch %s > %s)", name, exc.details.get("epoch"), self.epoch)
                elif isinstance(exc, UNAVAILABLE):
                    # Not the duty's failure: it waits for its store to come back (said once per outage, not per tick).
                    self._outages.failed(f"background duty {name}", f"waiting for the {unavailable_dependency(exc)} to answer")
                else:
                    log.exception("background duty %s failed; retrying", name)
            await asyncio.sleep(interval)

    async def _environments(self, *, retired: bool = False) -> list[tuple[AeKeys, AeConfig]]:
        """The environments of the active policy on their nodes, and with `retired` those that left it with
        something still to finish (records to write, exits to call)."""
        policy = await self.state.policies.current()
        result = [(r.keys, r.config) for r in await self.state.queues.retired()] if retired else []
        if policy is None:
            return result
        for ae in policy.application_environments:
            config = AeConfig.of(policy, ae)
            assert config is not None
            result += [(self.state.queues.keys(node, ae), config) for node in policy.nodes if policy.hosts(ae, node)]
        return result

    async def expire_leases(self) -> None:
        policy = await self.state.policies.current()
        if policy is None:
            return
        for keys, config in await self._environments():
            silent = await expire_silent_servers(
                self.state.sessions,
                self.state.queues,
                self.state.connection_cache,
                policy,
                keys,
                self.state.settings.heartbeat_timeout_seconds,
            )
            if silent:
                SILENT_SERVERS.labels(keys.ae).inc(len(silent))
                log.warning("%d server(s) of %s on %s fell silent: connections closed, their work given back", len(silent), keys.ae, keys.node)
                await count_unexpected_terminations(self.state.sessions, self.state.queues, self.state.operator, keys, [str(server) for server in silent])
                await self._advise(subject("WLM", "WARN", "SERVER", "STOPPED", keys.ae), node=keys.node, servers=silent, reason="silent")
            result = await self.state.queues.reassign(keys, config, epoch=self.epoch)
            if result.requeued:
                REASSIGNED.labels(keys.ae).inc(result.requeued)
            if result.abandoned:
                ABANDONED.labels(keys.ae).inc(len(result.abandoned))
                await self._advise(subject("WLM", "WARN", "REQUEST", "ABANDONED", keys.ae), node=keys.node, count=len(result.abandoned))
            await self.state.queues.forget_tombstones(keys)
        await purge_departed_again(self.state.queues, policy)
        await self._finish_retired(policy)
        await self._report_drained(policy)

    async def _finish_retired(self, policy: ActivePolicy) -> None:
        """Environments that left with work in them (a departed queue manager's dynamic ones): expired leases end
        as usual (given back, then abandoned), queued work that a stale cache let in after the departure is purged,
        and once nothing is left and no cache can still let work in, the environment is forgotten."""
        queues, settle_ms = self.state.queues, int(2 * self.state.settings.connection_cache_seconds * 1000) + 1000
        for retired in await queues.retired():
            await expire_silent_servers(
                self.state.sessions, queues, self.state.connection_cache, policy, retired.keys, self.state.settings.heartbeat_timeout_seconds
            )
            await queues.reassign(retired.keys, retired.config)
            await queues.purge(retired.keys, retired.queue_manager)
            if await queues.clock_ms() - retired.since_ms > settle_ms and await queues.drained(retired.keys):
                await queues.forget_retired(retired)

    async def _report_drained(self, policy: ActivePolicy) -> None:
        """Move QUIESCING, REFRESHING and RESUMING environments on once the servers they wait for are gone."""
        for name, record in (await self.state.operator.states()).items():
            if record.state not in (AEState.QUIESCING, AEState.REFRESHING, AEState.RESUMING) or name not in policy.application_environments:
                continue
            query = select(func.count()).where(Connection.role == "server", Connection.state == "active", Connection.application_environment == name)
            if record.state is AEState.REFRESHING and record.refreshed_at is not None:
                query = query.where(Connection.connected_at < record.refreshed_at)  # the replacements may stay
            async with self.state.sessions() as session:
                if record.state is AEState.RESUMING or not await session.scalar(query):
                    state = await apply_event(session, self.state.operator, name, InternalEvent.SERVERS_DRAINED, f"from {record.state}")
                    if state is not record.state:
                        await self._advise(subject("WLM", "INFO", "APPLENV", "STATE", name), previous_state=record.state, state=state, reason="servers drained")

    async def manage_to_goals(self) -> None:
        """Judge each service class against its goal, then decide the servers (app.servers.service)."""
        policy = await self.state.policies.current()
        if policy is None:
            return
        # One process at a time judges and decides (the results are shared in Redis): the work is not repeated.
        lease_ms = int(max(3 * self.state.settings.goal_interval_seconds, 10) * 1000)
        if not await self.state.queues.hold_lease(f"{self.state.settings.redis_prefix}:manager", self._owner, lease_ms):
            return
        window = self.state.settings.goal_window_seconds
        for keys, _ in await self._environments():
            # Each environment on its own: one that fails is logged once, and the others are still managed.
            where = f"managing {keys.ae} on {keys.node} to its goals"
            try:
                judged = await evaluate_environment(self.state.queues, policy, keys, window)
                await manage_environment(self.state.queues, policy, keys, judged, window, launching=self.state.settings.launcher)
            except UNAVAILABLE:
                raise  # an outage stops the whole pass: the duty loop reports it and tries again
            except Exception as exc:  # noqa: BLE001 - a defect in one environment's figures must not stop the others
                self._unmanaged.failed(where, type(exc).__name__, str(exc), exc)
            else:
                self._unmanaged.succeeded(where)

    async def sweep_queues(self) -> None:
        """The slow queue sweeper's pass over every queue (app/sweeper)."""
        queues = self.state.queues
        assert queues.blobs is not None
        if self.sweeper is None:
            self.sweeper = Sweeper(queues, queues.blobs, self.state.settings, self.epoch)
        for keys, config in await self._environments():
            await self.sweeper.sweep_environment(keys, await queues.known_classes(keys, config))

    async def flush_records(self) -> int:
        """Returns how many records were written (tests flush on demand). One process at a time flushes an
        environment's outbox (a lease, `hold_lease`), so a batch is written once."""
        written, settings = 0, self.state.settings
        lease_ms = int(max(10 * settings.records_flush_seconds, 10) * 1000)
        for keys, _ in await self._environments(retired=True):
            if not await self.state.queues.hold_lease(keys.records_writer, self._owner, lease_ms):
                continue
            while True:
                incarnation, first_position, entries = await self.state.queues.pending_records(keys, settings.records_batch)
                if not entries:
                    break
                origin = records.OutboxOrigin(keys.tag, incarnation, first_position)
                write = partial(records.write_outbox_in_writer, settings.records_dir, entries, origin=origin)
                count, missing = await write(self._periods)
                if missing:
                    for version in missing:
                        self._periods[version] = records.period_table(await self.state.policies.version(version))
                    count, missing = await write(self._periods)
                    assert not missing
                await self.state.queues.ack_records(keys, entries)
                RECORDS_WRITTEN.inc(count)
                written += count
                if len(entries) < settings.records_batch:
                    break
        return written

    async def deliver_exits(self) -> None:
        settings = self.state.settings
        for keys, _ in await self._environments(retired=True):
            for raw in await self.state.queues.claim_exits(keys, EXIT_CLAIM_MS, 100):
                entry = json.loads(raw)
                retry, delay_ms = None, 0
                secret = await self._exit_secret(entry["qm"])
                if secret is None or not exit_urls.allowed(entry["exit"], settings.exit_url_allowlist):
                    exits.EXIT_CALLS.labels("refused").inc()
                elif await exits.call(self.http, entry["exit"], secret, exits.body_of(entry)):
                    exits.EXIT_CALLS.labels("delivered").inc()
                elif entry["attempt"] + 1 >= settings.exit_max_attempts:
                    exits.EXIT_CALLS.labels("dropped").inc()
                    log.warning("exit call for %s dropped after %d attempts", entry["id"], entry["attempt"] + 1)
                else:
                    exits.EXIT_CALLS.labels("retried").inc()
                    retry = json.dumps({**entry, "attempt": entry["attempt"] + 1})
                    delay_ms = int(exits.backoff_seconds(entry["attempt"], settings.exit_retry_base_seconds) * 1000)
                await self.state.queues.settle_exit(keys, raw, retry, delay_ms)

    async def _exit_secret(self, queue_manager: int) -> str | None:
        if queue_manager not in self._exit_secrets:
            async with self.state.sessions() as session:
                self._exit_secrets[queue_manager] = await session.scalar(
                    select(Connection.exit_secret).where(Connection.id == queue_manager)
                )
        return self._exit_secrets[queue_manager]
