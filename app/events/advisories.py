"""The advisories' stream: one capped Redis stream that every replica appends to and reads, so a reader on any replica
sees every replica's advisories, in one order. Its ids are Redis's clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from app.redis.context import RedisContext

# How many advisories the stream keeps (approximately: trimming is by whole nodes of the stream).
EVENTS_KEPT = 100_000


def events_key(prefix: str) -> str:
    """The advisories, a capped stream: what GET /v1/events sends and the event log it can be read back from."""
    return f"{prefix}:events"


# An entry of the stream as read: its id and its fields.
_Entry = tuple[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Advisory:
    id: str  # its id in the stream: '<ms>-<seq>'
    subject: str
    data: str  # JSON


class Advisories:
    """The stream's writes and its positions, on the shared client."""

    def __init__(self, context: RedisContext) -> None:
        self.redis = context.redis
        self.stream = events_key(context.prefix)

    async def append(self, subject: str, data: str) -> str:
        """Returns its id in the stream."""
        return str(await self.redis.xadd(self.stream, {"subject": subject, "data": data}, maxlen=EVENTS_KEPT, approximate=True))

    async def position_before(self, count: int) -> str:
        """The id after which the last `count` advisories come (0: after the latest)."""
        latest = cast(list[_Entry], await self.redis.xrevrange(self.stream, count=count + 1))
        return latest[count][0] if len(latest) > count else "0-0"


class AdvisoryReader:
    """Blocking reads of the stream, on a client of their own, so a reader never holds one of the API's connections."""

    def __init__(self, readers: Redis, prefix: str) -> None:
        self.readers = readers
        self.stream = events_key(prefix)

    async def read_after(self, position: str, count: int, block_ms: int) -> list[Advisory]:
        """Up to `count` advisories after `position`, waiting up to `block_ms` for one (none: the wait ended)."""
        # Per stream read (the one), its name and its entries.
        replies = cast(list[tuple[str, list[_Entry]]], await self.readers.xread({self.stream: position}, count=count, block=block_ms))
        return [Advisory(entry_id, fields["subject"], fields["data"]) for entry_id, fields in replies[0][1]] if replies else []
