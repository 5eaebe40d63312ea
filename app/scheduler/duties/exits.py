"""Exit delivery, every WLM_LEASE_CHECK_SECONDS: the calls to queue managers' exits that ended requests queued
(app.work.exits signs and sends them), delivered, retried with backoff or dropped after the last attempt. Each
call is claimed for a while first, so two processes at a hand-over do not both make it."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
from sqlalchemy import select

from app.connections import exit_urls
from app.connections.models import Connection
from app.queues.request_meta import ExitEntry
from app.scheduler.duties.context import DutyContext
from app.work import exits as exit_calls

log = logging.getLogger(__name__)

EXIT_CLAIM_MS = 60_000
EXIT_CLAIM_BATCH = 100


class ExitDelivery:
    def __init__(self, context: DutyContext) -> None:
        self.context = context
        self._http: httpx.AsyncClient | None = None  # made for the first exit (_client)
        self._secrets: dict[int, str | None] = {}  # by queue manager connection

    async def deliver_exits(self) -> None:
        state = self.context.state
        settings = state.settings
        for keys, _ in await self.context.environments(retired=True):
            for raw in await state.queues.outbox.claim_exits(keys, EXIT_CLAIM_MS, EXIT_CLAIM_BATCH):
                entry = ExitEntry.from_json(raw)
                retry, delay_ms = None, 0
                secret = await self._secret(entry.queue_manager)
                if secret is None or not exit_urls.allowed(entry.exit, settings.exit_url_allowlist):
                    exit_calls.EXIT_CALLS.labels("refused").inc()
                elif await exit_calls.call(await self._client(), entry.exit, secret, exit_calls.body_of(entry)):
                    exit_calls.EXIT_CALLS.labels("delivered").inc()
                elif entry.attempt + 1 >= settings.exit_max_attempts:
                    exit_calls.EXIT_CALLS.labels("dropped").inc()
                    log.warning("exit call for %s dropped after %d attempts", entry.id, entry.attempt + 1)
                else:
                    exit_calls.EXIT_CALLS.labels("retried").inc()
                    retry = json.dumps(entry.replace(attempt=entry.attempt + 1))
                    delay_ms = int(exit_calls.backoff_seconds(entry.attempt, settings.exit_retry_base_seconds) * 1000)
                await state.queues.outbox.settle_exit(keys, raw, retry, delay_ms)

    async def _secret(self, queue_manager: int) -> str | None:
        if queue_manager not in self._secrets:
            async with self.context.state.sessions() as session:
                self._secrets[queue_manager] = await session.scalar(select(Connection.exit_secret).where(Connection.id == queue_manager))
        return self._secrets[queue_manager]

    async def _client(self) -> httpx.AsyncClient:
        """The exits' HTTP client, made when the first exit is due: its TLS context reads the CA bundle (25 ms of
        CPU), in a thread, and only in a process that has exits to call."""
        if self._http is None:
            verify = await asyncio.to_thread(httpx.create_ssl_context)
            self._http = httpx.AsyncClient(verify=verify, timeout=self.context.state.settings.exit_timeout_seconds, follow_redirects=False)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
