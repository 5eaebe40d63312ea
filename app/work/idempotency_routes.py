"""Where requests with idempotency keys were routed, so a retry goes to the node the first try went to (the key
itself is kept with the queue there: lua/insert.lua)."""

from __future__ import annotations

from collections.abc import Sequence

from app.redis.context import RedisContext


def idempotency_route_key(prefix: str, queue_manager: int, ae: str, key: str) -> str:
    """The node a request with this idempotency key was routed to, so a retry goes where the first try went
    (the key itself is kept per node, with the queue)."""
    return f"{prefix}:idem-route:{{{queue_manager}:{ae}:{key}}}"


class IdempotencyRoutes:
    def __init__(self, context: RedisContext, ttl_s: int) -> None:
        """`ttl_s`: as long as an idempotency key replays (WLM_IDEMPOTENCY_TTL_SECONDS)."""
        self.redis = context.redis
        self.prefix = context.prefix
        self.ttl_s = ttl_s

    async def routed_nodes(self, queue_manager: int, ae: str, idempotency_keys: Sequence[str]) -> list[str | None]:
        """The node each key was routed to (None: not yet), in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in idempotency_keys:
                pipe.get(idempotency_route_key(self.prefix, queue_manager, ae, key))
            return list(await pipe.execute())

    async def claim(self, queue_manager: int, ae: str, idempotency_keys: Sequence[str], node: str) -> None:
        """Route these keys to `node`, in one round trip, for as long as the keys replay. The first claim of a key
        wins: a concurrent retry's claim leaves it as it is (read it back with `routed_nodes`)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in idempotency_keys:
                pipe.set(idempotency_route_key(self.prefix, queue_manager, ae, key), node, nx=True, ex=self.ttl_s)
            await pipe.execute()
