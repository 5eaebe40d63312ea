"""When an insert is answered 201: once Redis has it on disk (WLM_DURABILITY=strict) or in memory (fast).

In strict mode this is checked against the Redis at startup (`durability_of`). A Redis is on disk before it replies
only with `appendfsync always` (concurrent writes of one turn of its event loop share one fsync), so the service
refuses to start on one that fsyncs every second: a host crash would lose up to a second of answered work. Where
CONFIG is refused (managed Redis), a server with WAITAOF (Redis 7.2 and later) is asked after each insert to confirm
its fsync; one without it cannot be checked, and a warning says so. The check is made once per process: a Redis
reconfigured later is not noticed until the service restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ResponseError

from app.errors import UNAVAILABLE, ServiceUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long an insert waits for its fsync before it is answered 503 (a healthy disk takes milliseconds).
WAITAOF_TIMEOUT_MS = 5_000
FAST_INSTEAD = "set WLM_DURABILITY=fast to answer once Redis has the work in memory"
HOW_TO_FIX = (
    "run that Redis with `appendonly yes`, `appendfsync always` and `no-appendfsync-on-rewrite no` (CONFIG SET, and "
    f"in its configuration file), or {FAST_INSTEAD}"
)


class NotDurable(RuntimeError):
    """Strict durability asked of a Redis that answers writes before they are on disk: the service does not start."""


class Durability:
    """How this process has an insert on disk before it answers: nothing to do (the server fsyncs before it
    replies, or fast mode), or WAITAOF."""

    def __init__(self, waitaof: bool = False) -> None:
        self.waitaof = waitaof

    async def write(self, redis: Redis, write: Callable[[Redis], Awaitable[T]]) -> T:
        """`write(client)`, returned once it is on disk. WAITAOF waits for the writes of the connection it is sent
        on, so the write and the WAITAOF share one. The writes confirmed this way must always write something, even
        when they change nothing (the insert script's sequence number does): a replay of an insert whose WAITAOF
        failed then waits for the first insert's fsync too, as the AOF is written in order."""
        if not self.waitaof:
            return await write(redis)
        async with redis.client() as connection:
            result = await write(connection)
            await confirm(connection)
        return result


async def confirm(connection: Redis) -> None:
    """Wait until this connection's writes are fsynced to the AOF."""
    fsynced, _ = await connection.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
    if int(fsynced) < 1:
        raise ServiceUnavailable(
            f"the work is queued, but Redis did not confirm it on disk within {WAITAOF_TIMEOUT_MS} ms; send it again "
            "with the same idempotency_key",
            code="not_durable",
        )


async def durability_of(redis: Redis, mode: Literal["strict", "fast"], probe_key: str) -> Durability:
    """How this Redis makes inserts durable in `mode`; NotDurable when strict mode cannot be had on it.

    Its configuration decides where it can be read: `appendfsync always` (and no pause of fsyncs during rewrites)
    is on disk before each reply, and nothing else is strict, WAITAOF included (with everysec, some servers confirm
    an fsync they have not done: redis/redis#13793; with no, never). Where CONFIG is refused (managed Redis), a write
    to `probe_key` followed by WAITAOF tells whether the server confirms fsyncs."""
    if mode == "fast":
        return Durability()
    # On a Redis Cluster, every primary: each holds the queues of its slots.
    nodes = redis.get_primaries() if isinstance(redis, RedisCluster) else [None]
    for node in nodes:
        where = {} if node is None else {"target_nodes": node}
        try:
            config = await redis.config_get("append*", **where) | await redis.config_get("no-appendfsync-on-rewrite", **where)
        except ResponseError:
            if node is not None:
                raise NotDurable(
                    "WLM_DURABILITY=strict, but a Redis Cluster node refuses CONFIG GET, so whether it fsyncs before it "
                    f"replies cannot be checked: allow CONFIG GET, or {FAST_INSTEAD}"
                ) from None
            return await _probed(redis, probe_key)
        settings = (config.get("appendonly"), config.get("appendfsync"), config.get("no-appendfsync-on-rewrite"))
        if settings != ("yes", "always", "no"):
            server = "Redis" if node is None else f"the Redis Cluster node {node.name}"
            raise NotDurable(
                f"WLM_DURABILITY=strict answers an insert only once it is on disk, but {server} runs with appendonly "
                f"{settings[0]}, appendfsync {settings[1]} and no-appendfsync-on-rewrite {settings[2]}: {HOW_TO_FIX}"
            )
    return Durability()


async def _probed(redis: Redis, probe_key: str) -> Durability:
    async with redis.client() as connection:
        await connection.incr(probe_key)
        try:
            await confirm(connection)
        except ResponseError:
            log.warning(
                "WLM_DURABILITY=strict, but Redis refuses CONFIG GET and has no WAITAOF: whether an insert is on disk "
                "before it is answered cannot be verified (it is if Redis runs with appendonly yes and appendfsync always)"
            )
            return Durability()
        except ServiceUnavailable as exc:
            raise NotDurable(f"WLM_DURABILITY=strict, but Redis does not confirm that writes reach its disk (WAITAOF): {HOW_TO_FIX}") from exc
    return Durability(waitaof=True)


class DeferredDurability(Durability):
    """Strict mode where Redis did not answer at startup (the service starts, not ready, and waits for it): the Redis
    is checked at the first insert instead, which is refused (503 not_durable) while it cannot be strict."""

    def __init__(self, mode: Literal["strict", "fast"], probe_key: str) -> None:
        super().__init__()
        self.mode, self.probe_key = mode, probe_key
        self._checked: Durability | None = None

    async def write(self, redis: Redis, write: Callable[[Redis], Awaitable[T]]) -> T:
        if self._checked is None:
            try:
                self._checked = await durability_of(redis, self.mode, self.probe_key)
            except NotDurable as exc:
                log.error("%s", exc)
                raise ServiceUnavailable(str(exc), code="not_durable") from exc
        return await self._checked.write(redis, write)


async def durability_at_start(redis: Redis, mode: Literal["strict", "fast"], probe_key: str) -> Durability:
    """`durability_of` now, or at the first insert if Redis does not answer yet."""
    try:
        return await durability_of(redis, mode, probe_key)
    except UNAVAILABLE as exc:
        log.warning("Redis does not answer (%s): its durability is checked at the first insert", exc)
        return DeferredDurability(mode, probe_key)
