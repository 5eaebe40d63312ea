"""Duties that one process at a time should do, held by a lease in Redis."""

from __future__ import annotations

from redis.asyncio import Redis


class DutyLeases:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def hold(self, key: str, owner: str, ms: int) -> bool:
        """Take or keep, for `ms`, a duty that one process at a time should do (flushing an outbox, launching
        servers). Not a fence: at the lease's end two holders can overlap for a moment, so what is leased this way
        must stay correct done twice (an outbox batch written twice is read once: readers drop duplicates)."""
        if await self.redis.set(key, owner, nx=True, px=ms):
            return True
        if await self.redis.get(key) == owner:
            await self.redis.pexpire(key, ms)
            return True
        return False
