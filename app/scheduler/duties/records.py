"""Record flushing, every WLM_RECORDS_FLUSH_SECONDS and once more at stop: the work records each environment's
outbox holds are written to Parquet (app.work.records), then acknowledged. One process at a time flushes an
environment (a lease), so a batch is written once; what fails stays in the outbox for the next pass or scheduler."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from prometheus_client import Counter

from app.scheduler.duties.context import DutyContext
from app.work import records

log = logging.getLogger(__name__)

RECORDS_WRITTEN = Counter("wlm_work_records_written_total", "Work records written to Parquet")
FLUSH_AT_STOP_SECONDS = 10.0


class RecordFlushing:
    def __init__(self, context: DutyContext) -> None:
        self.context = context
        self._periods: dict[int, records.PeriodTable] = {}  # policy versions the records of which were written

    async def flush_records(self) -> int:
        """Returns how many records were written."""
        state = self.context.state
        written, settings = 0, state.settings
        for keys, _ in await self.context.environments(retired=True):
            if not await state.leases.hold(keys.records_writer, self.context.owner, settings.records_lease_ms):
                continue
            while True:
                incarnation, first_position, entries = await state.queues.outbox.pending_records(keys, settings.records_batch)
                if not entries:
                    break
                origin = records.OutboxOrigin(keys.tag, incarnation, first_position)
                write = partial(records.write_outbox_in_writer, settings.records_dir, entries, origin=origin)
                count, missing = await write(self._periods)
                if missing:
                    for version in missing:
                        self._periods[version] = records.period_table(await state.policies.version(version))
                    count, missing = await write(self._periods)
                    assert not missing
                await state.queues.outbox.ack_records(keys, entries)
                RECORDS_WRITTEN.inc(count)
                written += count
                if len(entries) < settings.records_batch:
                    break
        return written

    async def flush_at_stop(self) -> None:
        """Write the records of work ended since the last flush now, so a stopped service's files are complete. Under
        the flush leases, like any flush; what fails stays in the outboxes for the next scheduler."""
        try:
            async with asyncio.timeout(FLUSH_AT_STOP_SECONDS):
                await self.flush_records()
        except Exception as exc:  # noqa: BLE001 - nothing is lost: the outboxes keep what was not written
            log.warning("work records not flushed at stop (%s: %s); the next scheduler writes them", type(exc).__name__, exc)
