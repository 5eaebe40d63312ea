"""The queues' metrics as the elected scheduler last rendered them, kept in Redis so that a scrape of any replica
serves them without reading every queue (app/health/exposition.py), and the mark scrapes leave that they are wanted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.client import NEVER_DECODE

from app.redis.context import RedisContext


def exposition_keys(prefix: str) -> tuple[str, str]:
    """The stored rendering (a hash) and the mark a scrape leaves that it is wanted (a key that expires)."""
    tag = f"{{{prefix}:metrics}}"
    return f"{tag}:exposition", f"{tag}:wanted"


@dataclass(frozen=True, slots=True)
class StoredExposition:
    """The exposition text deflated (raw deflate, flushed to a byte boundary without a final block, so a scrape can
    append its own counters to the stream: app/health/exposition.py), with the text's CRC-32 and length (a gzip
    trailer's), when its figures were read (Redis's clock) and under which policy version."""

    deflated: bytes
    crc32: int
    length: int
    rendered_ms: int
    policy_version: int


_FIELDS = ("deflated", "crc32", "length", "rendered_ms", "policy_version")


class Expositions:
    """The stored rendering's records, over the context the queues share."""

    def __init__(self, context: RedisContext) -> None:
        self.context = context
        self.stored, self.wanted = exposition_keys(context.prefix)

    async def keep(self, exposition: StoredExposition) -> None:
        """Replace the stored rendering, every field in one command. Not fenced: a deposed scheduler's rendering is
        as true as its stamp says, and a scrape judges it by that stamp."""
        await self.context.redis.hset(self.stored, mapping={name: getattr(exposition, name) for name in _FIELDS})

    async def wanted_lately(self) -> bool:
        """Whether a scrape asked for the queues' metrics lately (the scheduler renders them only then)."""
        return bool(await self.context.redis.exists(self.wanted))

    async def read(self, wanted_ms: int) -> tuple[StoredExposition | None, int]:
        """The stored rendering (None: none, or one this version cannot read) and now by Redis's clock; marks the
        rendering wanted for `wanted_ms`."""
        async with self.context.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.wanted, 1, px=wanted_ms)
            pipe.execute_command("HMGET", self.stored, *_FIELDS, **{NEVER_DECODE: True})
            _, values = await pipe.execute()
        now_ms = await self.context.clock_ms(near=self.stored)
        if any(value is None for value in values):
            return None, now_ms
        deflated, *numbers = cast(list[bytes], values)
        try:
            crc32, length, rendered_ms, policy_version = (int(number) for number in numbers)
        except ValueError:
            return None, now_ms
        return StoredExposition(deflated, crc32, length, rendered_ms, policy_version), now_ms
