"""Dead letters: requests abandoned after their last delivery, or ended `failed` by a server that asked for it, kept
with their payload in their environment's slot (dead_letter in lua/includes/finish.lua writes them in the script that ends
the request) until an operator retries or discards them, or they are older than the store's `dead_letter_ms`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import orjson

from app.errors import lua_error
from app.queues import script_specs as specs
from app.queues.base import StorePart
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys, queue_name
from app.queues.request_meta import RequestMeta

Position = Literal["front", "back"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: str
    died_ms: int  # Redis's clock
    reason: Literal["max_deliveries", "failed"]
    meta: RequestMeta  # the request's metadata at its end: class, deliveries, last server, error, times...
    payload: str  # JSON text, as inserted


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    letters: list[DeadLetter]
    last: tuple[int, str] | None  # where the next page starts after (died ms, id); None: the range has no more


def _letter(request_id: str, died_ms: float, raw: str) -> DeadLetter:
    letter = orjson.loads(raw)
    return DeadLetter(request_id, int(died_ms), letter["reason"], RequestMeta(letter["meta"]), letter["payload"])


class DeadLetters(StorePart):
    async def get(self, k: AeKeys, request_id: str) -> DeadLetter | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(k.dead, request_id)
            pipe.zscore(k.dead_at, request_id)
            raw, died_ms = await pipe.execute()
        if raw is None or died_ms is None:
            return None
        return _letter(request_id, died_ms, raw)

    async def page(self, k: AeKeys, after: tuple[int, str] | None, until_ms: int | None, count: int) -> DeadLetterPage:
        """Up to `count` dead letters in the order they died (by time, then id), after `after` (died ms, id) and
        up to `until_ms` (inclusive)."""
        low = "-inf" if after is None else after[0]
        high = "+inf" if until_ms is None else until_ms
        # Those of the same millisecond as `after` and not past its id are skipped: ask for enough to skip them.
        entries: list[tuple[str, float]] = []
        skip = 0
        while True:
            page = cast(
                list[tuple[str, float]], await self.redis.zrangebyscore(k.dead_at, low, high, start=skip, num=count + 1, withscores=True)
            )
            fresh = [(m, s) for m, s in page if after is None or (int(s), m) > after]
            entries += fresh
            if len(page) < count + 1 or len(entries) > count:
                break
            skip += len(page)
        more = len(entries) > count
        entries = entries[:count]
        raws = cast(list[str | None], await self.redis.hmget(k.dead, [m for m, _ in entries])) if entries else []
        # One retried or discarded since the range was read has no letter: it is left out.
        letters = [_letter(m, s, raw) for (m, s), raw in zip(entries, raws, strict=True) if raw is not None]
        return DeadLetterPage(letters, (int(entries[-1][1]), entries[-1][0]) if more else None)

    async def retry(self, k: AeKeys, request_id: str, position: Position) -> RequestMeta:
        """Queue a dead letter again, at the front or back of its class queue, under its id; returns its new
        metadata. A dead letter already retried (or discarded, or gone) is refused as unknown_dead_letter: of two
        retries of one dead letter, however close, one queues it."""
        letter = await self.get(k, request_id)
        if letter is None:
            raise lua_error(ReturnCode.UNKNOWN_DEAD_LETTER, [])
        queue = queue_name(letter.meta.service_class, letter.meta.dependent)
        for _ in range(2):  # the dead letter read may have been retried and died again meanwhile, in another queue
            keys = [k.req, k.payload, k.depth, k.classes, k.places, k.swept, k.sweeping, k.waiters, *k.tombstone_keys, k.dead]
            keys += [k.dead_at, k.holes, k.front(queue), k.rear(queue)]
            call = specs.DEAD_RETRY(keys, [request_id, queue, position, k.notify_channel, k.wake_prefix])
            result = await self.scripts.call(call)
            code = ReturnCode(int(result[0]))
            if code is ReturnCode.DEAD_LETTER_MOVED:
                queue = str(result[1])
                continue
            if code is not ReturnCode.OK:
                raise lua_error(code, result[1:])
            return RequestMeta.from_json(result[1])
        raise lua_error(ReturnCode.UNKNOWN_DEAD_LETTER, [])

    async def discard(self, k: AeKeys, request_ids: Sequence[str]) -> list[str]:
        """The ids that were dead letters here, now gone."""
        if not request_ids:
            return []
        result = await self.scripts.run(specs.DEAD_DISCARD([k.dead, k.dead_at], arg_groups=[request_ids]))
        return [str(v) for v in result]
