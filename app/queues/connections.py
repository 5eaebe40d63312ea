"""Connections beside the queues: each active connection's record under its token hash (read by a process that has
not cached it), a server's registration, and the queue managers that departed, until their queues are purged a
second time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from app.queues.base import StoreBase
from app.queues.keys import AeKeys, connection_key, departed_key


@dataclass(frozen=True, slots=True)
class Departed:
    """A queue manager that disconnected, as recorded when it did."""

    record: dict[str, Any]
    member: str  # as stored, to forget it by


class ConnectionRecords(StoreBase):
    async def save_connection(self, token_hash: str, record: Mapping[str, Any]) -> None:
        await self.redis.set(connection_key(self.prefix, token_hash), json.dumps(record))

    async def connection(self, token_hash: str) -> dict[str, Any] | None:
        raw = await self.redis.get(connection_key(self.prefix, token_hash))
        return json.loads(raw) if raw is not None else None

    async def forget_connection(self, token_hash: str) -> None:
        await self.redis.delete(connection_key(self.prefix, token_hash))

    async def unregister_server(self, k: AeKeys, server_id: int) -> None:
        """A server of an environment that left the policy: nothing it held can be requeued there, so it just goes,
        with what the environment kept about it."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in (k.servers, k.seen, k.inflight, k.served_at):
                pipe.hdel(key, str(server_id))
            await pipe.execute()

    async def note_departed(self, record: Mapping[str, Any], purge_again_after_ms: int) -> None:
        """A queue manager that disconnected, due for its second purge `purge_again_after_ms` from now (Redis's clock)."""
        due_ms = await self.clock_ms() + purge_again_after_ms
        await self.redis.zadd(departed_key(self.prefix), {json.dumps(record): due_ms})

    async def departed_due(self) -> list[Departed]:
        """The departed queue managers whose second purge is due now."""
        members = cast(list[str], await self.redis.zrangebyscore(departed_key(self.prefix), "-inf", await self.clock_ms()))
        return [Departed(json.loads(member), member) for member in members]

    async def forget_departed(self, departed: Departed) -> None:
        await self.redis.zrem(departed_key(self.prefix), departed.member)
