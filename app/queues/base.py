"""What every part of the queue store shares: the Redis client, the scripts, the settings, Redis's clock, and
what the scripts need to know of an environment's definition; and the parts' own base, over it."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis, RedisCluster

from app.queues.keys import AeKeys, ae_keys
from app.queues.scripts import queue_sources
from app.queues.swept_blobs import SweptBlobStore
from app.redis.context import RedisContext
from app.redis.durability import Durability
from app.redis.scripts import Scripts
from app.redis.topology import cluster_enabled


@dataclass(frozen=True, slots=True)
class GroupCap:
    """A resource group as the queues hold work to it (app/queues/resource_groups.py)."""

    name: str
    max_in_flight: int | None
    min_in_flight: int | None


@dataclass(frozen=True, slots=True)
class AeConfig:
    """What the scripts need to know of an environment's definition (the policy builds it: `queue_config`)."""

    class_order: tuple[str, ...]
    completion_time_ms: int
    backlog_limit: int
    max_deliveries: int
    # Per class of `class_order`: its importance rank (lower: more important), and its resource group (None: none).
    class_ranks: tuple[int, ...] = ()
    class_groups: tuple[GroupCap | None, ...] = ()

    @property
    def tiers(self) -> tuple[int, ...]:
        """Per class of `class_order`, its tier in a select (a server's home class goes first among its tier's): its
        importance rank, or, where the ranks are not known, a tier of its own."""
        return self.class_ranks or tuple(range(len(self.class_order)))


class StoreBase:
    """What the parts of one store share: the store is one (its hot path extends it), and holds its other parts, each
    over it (StorePart)."""

    def __init__(
        self,
        redis: Redis,
        prefix: str,
        *,
        idempotency_ttl_s: int,
        tombstone_ms: int,
        samples_ms: int,
        dead_letter_ms: int = 7 * 86_400_000,
        promotion_ms: int = 20_000,
        promotion_share: float = 0.005,
        blobs: SweptBlobStore | None = None,
        durability: Durability | None = None,
    ) -> None:
        """`promotion_ms`, `promotion_share`: a request queued longer is selected ahead of the class order, within
        that share of an environment's selects (starved_class in lua/includes/promotion.lua).
        `blobs`: where swept parts of queues are (None: this store never sweeps, nor finds anything swept).
        `durability`: how an insert is on disk before it returns (app/redis/durability.py; None: once in memory)."""
        # The context the other owners of Redis records share with the queues (app/state.py hands it to them).
        self.context = RedisContext(redis, prefix, Scripts(redis, queue_sources()))
        self.redis = redis
        self.prefix = prefix
        self.scripts = self.context.scripts
        self.blobs = blobs
        self.durability = durability or Durability()
        self.idempotency_ttl_s = idempotency_ttl_s
        self.tombstone_ms = tombstone_ms
        self.samples_ms = samples_ms  # how long ended requests are kept as samples for goal evaluation
        self.dead_letter_ms = dead_letter_ms  # how long a dead letter is kept (dead_letter in lua/includes/finish.lua)
        self.promotion_ms = promotion_ms
        self.promotion_share = promotion_share
        self._standalone_seen = False  # a single server's kind is asked until it has answered once (`ping`)

    def keys(self, node: str, ae: str) -> AeKeys:
        return ae_keys(self.prefix, node, ae)

    async def clock_ms(self, near: str | None = None) -> int:
        """Now by Redis's clock (RedisContext.clock_ms)."""
        return await self.context.clock_ms(near)

    async def aclose(self) -> None:
        """Closes what the store opened of its own (the scripts' pipelined connection); not the Redis client."""
        await self.scripts.aclose()

    async def ping(self) -> None:
        """Raises unless Redis answers: on a Redis Cluster, every primary, and the cluster says its state is ok
        (every slot served). A client of one server is not ready on a cluster node (one that did not answer when
        the service started, and was taken for a single server): most of its queues' keys would answer MOVED."""
        if not isinstance(self.redis, RedisCluster):
            await self.redis.ping()
            if not self._standalone_seen:
                if await cluster_enabled(self.redis):
                    raise RuntimeError(
                        "WLM_REDIS_URL names a Redis Cluster node, which did not answer when the service started and "
                        "was taken for a single server: restart the service"
                    )
                self._standalone_seen = True
            return
        await self.redis.ping(target_nodes=RedisCluster.PRIMARIES)
        state = (await self.redis.cluster_info()).get("cluster_state")
        if state != "ok":
            raise RuntimeError(f"the Redis Cluster's state is {state}")


class StorePart:
    """A part of the queue store by concern (store.py), over the store's one base: its client, prefix and scripts,
    and the settings, blobs and clock read through `base`, so that a setting changed on the store holds for every
    part."""

    def __init__(self, base: StoreBase) -> None:
        self.base = base
        self.redis = base.redis
        self.prefix = base.prefix
        self.scripts = base.scripts
