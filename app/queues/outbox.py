"""What ended requests leave behind on the queues until the duties take it: work records (the outbox), exit calls
to make, tombstones, and samples for goal evaluation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.queues import script_specs as specs
from app.queues.base import StorePart
from app.queues.keys import AeKeys


@dataclass(frozen=True, slots=True)
class EndSample:
    service_class: str
    response_ms: int  # insert to end
    queue_ms: int  # insert to the select of the delivery that ended
    execution_ms: int  # that select to end


class Outbox(StorePart):
    async def pending_records(self, k: AeKeys, limit: int) -> tuple[str, int, list[str]]:
        """The outbox's incarnation ('' if it is empty and has none yet), the position of its first record and its
        first `limit` records, read together (lua/pending_records.lua)."""
        keys = [k.records, k.records_acked, k.records_incarnation]
        incarnation, acked, entries = await self.scripts.run(specs.PENDING_RECORDS(keys, [limit, uuid.uuid4().hex[:16]]))
        return str(incarnation), int(acked), [str(v) for v in entries]

    async def ack_records(self, k: AeKeys, records: Sequence[str]) -> int:
        result = await self.scripts.run(specs.ACK_RECORDS([k.records, k.records_acked], [len(records), records[0], records[-1]]))
        return int(result[0])

    async def claim_exits(self, k: AeKeys, claim_ms: int, limit: int) -> list[str]:
        return [str(v) for v in await self.scripts.run(specs.CLAIM_EXITS([k.exits], [claim_ms, limit]))]

    async def settle_exit(self, k: AeKeys, entry: str, retry: str | None, delay_ms: int) -> None:
        """Delivered or given up (retry None), else replaced by its next attempt `delay_ms` from now, in one
        transaction."""
        due_ms = await self.base.clock_ms(near=k.exits) + delay_ms if retry is not None else 0
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(k.exits, entry)
            if retry is not None:
                pipe.zadd(k.exits, {retry: due_ms})
            await pipe.execute()

    async def forget_tombstones(self, k: AeKeys, page: int = 1000) -> None:
        """Every expired tombstone, a page per transaction, so cleaning keeps up with any rate of ends."""
        now = await self.base.clock_ms(near=k.done_exp)
        while expired := await self.redis.zrangebyscore(k.done_exp, "-inf", now, start=0, num=page):
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hdel(k.done, *expired)
                pipe.zrem(k.done_exp, *expired)
                await pipe.execute()
            if len(expired) < page:
                return

    async def samples(self, k: AeKeys, since_ms: int) -> list[EndSample]:
        """Requests ended (by their server) at or after `since_ms`, for goal evaluation."""
        result = []
        for n, member in enumerate(await self.redis.zrangebyscore(k.samples, since_ms, "+inf"), 1):
            service_class, response, queue, execution, _ = str(member).split("|", 4)
            result.append(EndSample(service_class, int(response), int(queue), int(execution)))
            if n % 1000 == 0:
                await asyncio.sleep(0)  # thousands of samples: let the requests waiting on this process through
        return result
