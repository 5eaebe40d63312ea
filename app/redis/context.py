"""What every owner of Redis records shares: the client, the key prefix, and the scripts (one pipelined connection
per process), with Redis's clock, the one every script stamps with."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis, RedisCluster

from app.redis.scripts import Scripts


def redis_time_ms(time: tuple[int, int]) -> int:
    """Redis's TIME (seconds, microseconds) in milliseconds, as now_ms() in the scripts reads it."""
    seconds, micros = time
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass(frozen=True, slots=True)
class RedisContext:
    # Its replies come decoded (topology.open_redis), which redis-py's types cannot know: they say `bytes | str`,
    # and the owners cast what they read to the str it is.
    redis: Redis
    prefix: str
    scripts: Scripts

    async def clock_ms(self, near: str | None = None) -> int:
        """Now by Redis's clock: instants compared with what the scripts wrote (leases, heartbeats, tombstones, due
        times) are taken here, never from this process's clock. On a Redis Cluster each node has its clock: `near`, a
        key, names the node whose stamps the instant is compared with."""
        if near is not None and isinstance(self.redis, RedisCluster):
            return redis_time_ms(await self.redis.time(target_nodes=self.redis.get_node_from_key(near)))
        return redis_time_ms(await self.redis.time())
