"""What the manager loop publishes per environment and node, so that every replica answers the same: the latest goal
evaluation, and the server decisions that the select script reads (home classes, surplus servers, servers wanted)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from app.queues.base import StorePart
from app.queues.keys import AeKeys

# The field of the desired-servers hash that holds the total over the service classes.
DESIRED_TOTAL = "*"


class ManagerResults(StorePart):
    async def publish_performance(self, k: AeKeys, periods: Mapping[str, str]) -> None:
        """Replace the latest evaluation at once: 'class:period' -> its judgement (JSON)."""
        await self._replace_hash(k.performance, periods)

    async def publish_buckets(self, k: AeKeys, specs: Mapping[str, str]) -> None:
        """Replace what the end scripts count each class's requests in (app.policy.active.bucket_specs) at once."""
        await self._replace_hash(k.buckets, specs)

    async def _replace_hash(self, key: str, mapping: Mapping[str, str]) -> None:
        """A hash's whole content replaced in one MULTI: no reader sees it half written."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            if mapping:
                pipe.hset(key, mapping=dict(mapping))  # type: ignore[arg-type]  # redis-py keys it by a union: no dict[str, str] fits
            await pipe.execute()

    async def performance(self, k: AeKeys) -> list[str]:
        """The latest evaluation's class periods (JSON each; none before the first)."""
        return list(cast(dict[str, str], await self.redis.hgetall(k.performance)).values())

    async def server_homes(self, k: AeKeys) -> dict[str, str]:
        """The latest decision's home class of each server (by server id)."""
        return cast(dict[str, str], await self.redis.hgetall(k.assign))

    async def publish_decision(self, k: AeKeys, homes: Mapping[int, str], retired: Sequence[int], desired: Mapping[str, int]) -> None:
        """Replace the latest decision at once (a MULTI): each server's home class, the surplus servers told to end,
        and the servers each class should have (with their total)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(k.assign, k.retire, k.desired)
            if homes:
                pipe.hset(k.assign, mapping={str(sid): name for sid, name in homes.items()})
            if retired:
                pipe.sadd(k.retire, *[str(sid) for sid in retired])
            counts = {**desired, DESIRED_TOTAL: sum(desired.values())}
            pipe.hset(k.desired, mapping=counts)  # type: ignore[arg-type]  # keyed by a union, as in _replace_hash
            await pipe.execute()

    async def desired_servers(self, k: AeKeys) -> tuple[int, dict[str, int]]:
        """The latest decision's servers wanted: the total, and per service class (0 and none before the first)."""
        raw = cast(dict[str, str], await self.redis.hgetall(k.desired))
        per_class = {name: int(count) for name, count in raw.items() if name != DESIRED_TOTAL}
        return int(raw.get(DESIRED_TOTAL, 0)), per_class
