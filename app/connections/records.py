"""Connections' records in Redis: each active connection's record under its token hash (read by a process that has
not cached it), and the queue managers that departed, until their queues are purged a second time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from app.redis.context import RedisContext


def connection_key(prefix: str, token_hash: str) -> str:
    return f"{prefix}:conn:{{{token_hash}}}"


def departed_key(prefix: str) -> str:
    """Queue managers that disconnected, by when their queues are purged a second time."""
    return f"{prefix}:departed"


@dataclass(frozen=True, slots=True)
class Departed:
    """A queue manager that disconnected, as recorded when it did."""

    record: dict[str, Any]
    member: str  # as stored, to forget it by


class ConnectionRecords:
    def __init__(self, context: RedisContext) -> None:
        self.context = context
        self.redis = context.redis
        self.prefix = context.prefix

    async def save(self, token_hash: str, record: Mapping[str, Any]) -> None:
        await self.redis.set(connection_key(self.prefix, token_hash), json.dumps(record))

    async def get(self, token_hash: str) -> dict[str, Any] | None:
        raw = await self.redis.get(connection_key(self.prefix, token_hash))
        return json.loads(raw) if raw is not None else None

    async def forget(self, token_hash: str) -> None:
        await self.redis.delete(connection_key(self.prefix, token_hash))

    async def note_departed(self, record: Mapping[str, Any], purge_again_after_ms: int) -> None:
        """A queue manager that disconnected, due for its second purge `purge_again_after_ms` from now (Redis's clock)."""
        due_ms = await self.context.clock_ms() + purge_again_after_ms
        await self.redis.zadd(departed_key(self.prefix), {json.dumps(record): due_ms})

    async def departed_due(self) -> list[Departed]:
        """The departed queue managers whose second purge is due now."""
        members = cast(list[str], await self.redis.zrangebyscore(departed_key(self.prefix), "-inf", await self.context.clock_ms()))
        return [Departed(json.loads(member), member) for member in members]

    async def forget_departed(self, departed: Departed) -> None:
        await self.redis.zrem(departed_key(self.prefix), departed.member)
