"""Background duties of the work lifecycle: reassign requests whose completion time passed, flush work
records to Parquet, deliver exit calls, forget old tombstones.

Every script they run is atomic and safe to run from several processes at once; until the elected scheduler
exists (a later issue), every service process runs them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable

import httpx
from prometheus_client import Counter
from sqlalchemy import select

from app.connections import exit_urls
from app.connections.models import Connection
from app.connections.service import expire_silent_servers, purge_departed_again
from app.queues.keys import AeKeys
from app.queues.store import AeConfig, now_ms
from app.servers.service import evaluate_environment, manage_environment
from app.state import AppState
from app.work import exits, records

log = logging.getLogger(__name__)

REASSIGNED = Counter("wlm_work_reassigned_total", "Requests given back after their completion time", ["application_environment"])
ABANDONED = Counter("wlm_work_abandoned_total", "Requests abandoned after their last delivery", ["application_environment"])
SILENT_SERVERS = Counter(
    "wlm_servers_expired_total", "Servers that fell silent (no select or heartbeat in time)", ["application_environment"]
)
RECORDS_WRITTEN = Counter("wlm_work_records_written_total", "Work records written to Parquet")
EXIT_CLAIM_MS = 60_000


class Duties:
    def __init__(self, state: AppState) -> None:
        self.state = state
        self.http = httpx.AsyncClient(timeout=state.settings.exit_timeout_seconds, follow_redirects=False)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._exit_secrets: dict[int, str | None] = {}
        self._owner = secrets.token_hex(8)  # this process, as the holder of an outbox's writer lease
        self._periods: dict[int, records.PeriodTable] = {}  # policy versions the records of which were written

    async def start(self) -> None:
        await records.start_writer()
        settings = self.state.settings
        for name, interval, duty in (
            ("leases", settings.lease_check_seconds, self.expire_leases),
            ("records", settings.records_flush_seconds, self.flush_records),
            ("exits", settings.lease_check_seconds, self.deliver_exits),
            ("goals", settings.goal_interval_seconds, self.manage_to_goals),
        ):
            self._tasks.append(asyncio.create_task(self._every(interval, duty), name=f"wlm-duty-{name}"))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.wait(self._tasks, timeout=10)
        await self.http.aclose()

    async def _every(self, interval: float, duty: Callable[[], Awaitable[object]]) -> None:
        # The flag, not only the cancellation: a driver that turns a CancelledError into another error (seen
        # with database calls cancelled mid-flight) must not keep a stopping service's duty alive.
        while not self._stopping:
            try:
                await duty()
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._stopping:
                    return
                log.exception("background duty %s failed; retrying", getattr(duty, "__name__", duty))
            await asyncio.sleep(interval)

    async def _environments(self) -> list[tuple[AeKeys, AeConfig]]:
        policy = await self.state.policies.current()
        if policy is None:
            return []
        result = []
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
                SILENT_SERVERS.labels(keys.ae).inc(silent)
                log.warning("%d server(s) of %s on %s fell silent: connections closed, their work given back", silent, keys.ae, keys.node)
            result = await self.state.queues.reassign(keys, config)
            if result.requeued:
                REASSIGNED.labels(keys.ae).inc(result.requeued)
            if result.abandoned:
                ABANDONED.labels(keys.ae).inc(len(result.abandoned))
            await self.state.queues.forget_tombstones(keys)
        await purge_departed_again(self.state.queues, policy)

    async def manage_to_goals(self) -> None:
        """Judge each service class against its goal, then decide the servers (app.servers.service)."""
        policy = await self.state.policies.current()
        if policy is None:
            return
        for keys, _ in await self._environments():
            window = self.state.settings.goal_window_seconds
            judged = await evaluate_environment(self.state.queues, policy, keys, window)
            await manage_environment(self.state.queues, policy, keys, judged, window)

    async def flush_records(self) -> int:
        """Returns how many records were written (tests flush on demand). One process at a time flushes an
        environment's outbox (`hold_records_writer`), so a batch is written once."""
        written, settings = 0, self.state.settings
        lease_ms = int(max(10 * settings.records_flush_seconds, 10) * 1000)
        for keys, _ in await self._environments():
            if not await self.state.queues.hold_records_writer(keys, self._owner, lease_ms):
                continue
            while entries := await self.state.queues.pending_records(keys, settings.records_batch):
                count, missing = await records.write_outbox_in_writer(settings.records_dir, entries, self._periods)
                if missing:
                    for version in missing:
                        self._periods[version] = records.period_table(await self.state.policies.version(version))
                    count, missing = await records.write_outbox_in_writer(settings.records_dir, entries, self._periods)
                    assert not missing
                await self.state.queues.ack_records(keys, entries)
                RECORDS_WRITTEN.inc(count)
                written += count
                if len(entries) < settings.records_batch:
                    break
        return written

    async def deliver_exits(self) -> None:
        settings = self.state.settings
        for keys, _ in await self._environments():
            for raw in await self.state.queues.claim_exits(keys, EXIT_CLAIM_MS, 100):
                entry = json.loads(raw)
                retry, due = None, 0
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
                    due = now_ms() + int(exits.backoff_seconds(entry["attempt"], settings.exit_retry_base_seconds) * 1000)
                await self.state.queues.settle_exit(keys, raw, retry, due)

    async def _exit_secret(self, queue_manager: int) -> str | None:
        if queue_manager not in self._exit_secrets:
            async with self.state.sessions() as session:
                self._exit_secrets[queue_manager] = await session.scalar(
                    select(Connection.exit_secret).where(Connection.id == queue_manager)
                )
        return self._exit_secrets[queue_manager]
