"""When an insert is answered 201: once Redis has it on disk (WLM_DURABILITY=strict) or in memory (fast).

In strict mode this is checked against the Redis at startup (`durability_of`). A Redis is on disk before it replies
only with `appendfsync always` (concurrent writes of one turn of its event loop share one fsync), so the service
refuses to start on one that fsyncs every second: a host crash would lose up to a second of answered work. Where
CONFIG is refused (managed Redis), a server with WAITAOF (Redis 7.2 and later) is asked after each insert to confirm
its fsync; one without it cannot be checked, and a warning says so. The check is made once per process: a Redis
reconfigured later is not noticed until the service restarts.

A master's disk does not outlive the master: where it has replicas, one of them is promoted when it dies, with only
what it had received. So in strict mode an insert on a master with a replica online is answered once one replica
has it too (WAIT, on the connection that wrote it). A master with none answers on its own disk alone (Redis's
`min-replicas-to-write` refuses its writes instead, where that is wanted: 503).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import AskError, MovedError, ResponseError, TryAgainError

from app.errors import UNAVAILABLE, ServiceUnavailable, unavailable
from app.redis.script_spec import ScriptCall
from app.redis.scripts import Scripts, checked
from app.redis.topology import ClusterClient

log = logging.getLogger(__name__)

# How long an insert waits for its fsync before it is answered 503 (a healthy disk takes milliseconds).
WAITAOF_TIMEOUT_MS = 5_000
# How often a master's replicas are counted again (INFO replication): one read per second per node and process.
REPLICAS_READ_EVERY_S = 1.0
# Redirects (MOVED) an insert on a Redis Cluster follows to its slot's master before it is answered 503.
REDIRECTS = 2
# After a WAIT no replica answered, how long a master's strict inserts are refused before one is let through.
UNCONFIRMED_REFUSAL_S = 1.0
FAST_INSTEAD = "set WLM_DURABILITY=fast to answer once Redis has the work in memory"
HOW_TO_FIX = (
    "run that Redis with `appendonly yes`, `appendfsync always` and `no-appendfsync-on-rewrite no` (CONFIG SET, and "
    f"in its configuration file), or {FAST_INSTEAD}"
)


class NotDurable(RuntimeError):
    """Strict durability asked of a Redis that answers writes before they are on disk: the service does not start."""


class Durability:
    """How this process has an insert durable before it answers: nothing to do (the server fsyncs before it replies,
    or fast mode), WAITAOF, and in strict mode WAIT for a replica where the master has one (`replicas`)."""

    def __init__(self, waitaof: bool = False, replicas: Replicas | None = None) -> None:
        self.waitaof = waitaof
        self.replicas = replicas

    async def run(self, scripts: Scripts, redis: Redis, call: ScriptCall) -> list[Any]:
        """The script `call` makes, a write of one queue (its keys share one hash tag), run as `Scripts.run` does and returned
        once it is durable. WAITAOF and WAIT wait for the writes of the connection they are sent on, so the script
        and they share one (on a cluster, one to the keys' master). The scripts confirmed this way must always write
        something, even when they change nothing (the insert script's sequence number does): a replay of an insert
        whose confirmation failed then waits for the first insert's too, as the AOF and the replication stream are
        written in order."""
        if not self.waitaof and self.replicas is None:
            return await scripts.run(call)
        for _ in range(REDIRECTS + 1):
            try:
                return await self._run(scripts, redis, call)
            except MovedError as redirect:  # the write was not made: only the keys' master's own client sees one
                if not isinstance(redis, ClusterClient):
                    raise
                await redis.moved(redirect)
            except (AskError, TryAgainError) as migrating:  # likewise not made: the slot is moving between masters
                raise ServiceUnavailable(
                    f"the Redis Cluster slot of this queue is being migrated ({migrating}); send it again shortly with "
                    "the same idempotency_key",
                    code="redis_unavailable",
                ) from migrating
        raise ServiceUnavailable(
            f"the Redis Cluster slot of this queue moved more than {REDIRECTS} times; send it again with the same idempotency_key",
            code="redis_unavailable",
        )

    async def _run(self, scripts: Scripts, redis: Redis, call: ScriptCall) -> list[Any]:
        cluster = redis if isinstance(redis, ClusterClient) else None
        try:
            master = await cluster.master_of(call.keys[0]) if cluster is not None else redis
            replicas = self.replicas if self.replicas is not None and await self.replicas.online(master) else None
            if not self.waitaof and replicas is None:
                return await scripts.run(call)
            if replicas is not None:
                replicas.admit(master)
                if not self.waitaof:
                    pipelined = await scripts.call_and_wait(call, replicas.timeout_ms)
                    if pipelined is not None:
                        confirmed = replicas.observe(master, pipelined[1])
                        result = checked(pipelined[0])  # a refusal (429 backlog limit) is answered as such
                        if not confirmed:
                            raise replicas.unconfirmed()
                        return result
            async with master.client() as connection:
                reply = await scripts.call(call, connection)
                if self.waitaof:
                    await confirm(connection)
                confirmed = True
                if replicas is not None:
                    acknowledged = int(await connection.execute_command("WAIT", 1, replicas.timeout_ms))
                    confirmed = replicas.observe(master, acknowledged)
            result = checked(reply)
            if replicas is not None and not confirmed:  # only a replica's WAIT leaves it unconfirmed
                raise replicas.unconfirmed()
            return result
        except Exception as exc:
            if cluster is not None and unavailable(exc):
                cluster.lost()
            raise


class Replicas:
    """Strict mode on masters with replicas: how many each has online, read again at most once a second (the
    inserts meanwhile go on with the last count), and what a WAIT for one of them after an insert answered.

    A replica that stopped answering still counts as online until Redis gives it up (`repl-timeout`, 60 s), and
    the inserts of one process wait in turn behind each other's WAIT: so after a WAIT that no replica answered,
    the master's inserts are refused at once (503, nothing queued) for a second, then one is let through to try."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._online: dict[str, tuple[int, float]] = {}  # by master: replicas online, and when to read again
        self._refusing: dict[str, float] = {}  # by master: until when inserts are refused (monotonic)

    async def online(self, master: Redis) -> int:
        name = _name(master)
        known = self._online.get(name)
        now = time.monotonic()
        if known is not None and now < known[1]:
            return known[0]
        if known is not None:
            self._online[name] = (known[0], now + REPLICAS_READ_EVERY_S)
        try:
            info = await master.info("replication")
        except ResponseError as exc:  # INFO denied (an ACL, a managed service): nothing to count by
            if known is None:
                log.warning("Redis %s refuses INFO (%s): its replicas cannot be counted, and are not waited for", name, exc)
            info = {}
        count = sum(1 for field, value in info.items() if field.startswith("slave") and _online(value))
        self._online[name] = (count, time.monotonic() + REPLICAS_READ_EVERY_S)
        if known is None or (count == 0) != (known[0] == 0):
            if count:
                log.info("Redis %s has %d replica(s) online: a strict insert is answered once one has it", name, count)
            else:
                report = log.info if known is None else log.warning
                report("Redis %s has no replica online: a strict insert is answered on its disk alone", name)
        return count

    def admit(self, master: Redis) -> None:
        """Refuse an insert while no replica of `master` confirmed the last one; after a second, let one through."""
        name = _name(master)
        until = self._refusing.get(name)
        if until is None:
            return
        now = time.monotonic()
        if now < until:
            raise ServiceUnavailable(
                "no replica of this queue's Redis confirmed its latest writes: the work was not queued; send it again "
                "shortly with the same idempotency_key",
                code="not_durable",
            )
        self._refusing[name] = now + self.timeout_ms / 1000 + UNCONFIRMED_REFUSAL_S  # the others wait for this one

    def observe(self, master: Redis, replicas: int) -> bool:
        """Whether a replica confirmed an insert (`replicas`: what WAIT for one answered). None did: the master's
        inserts are refused for a second (the later deadline kept, so a second try is not let through while the
        first is out), and its replicas counted again."""
        name = _name(master)
        if replicas >= 1:
            self._refusing.pop(name, None)
            return True
        self._refusing[name] = max(self._refusing.get(name, 0.0), time.monotonic() + UNCONFIRMED_REFUSAL_S)
        self._online[name] = (self._online[name][0], 0.0)  # counted again at the next insert: the replica may be gone
        return False

    def unconfirmed(self) -> ServiceUnavailable:
        return ServiceUnavailable(
            f"the work is queued, but no replica of its Redis confirmed it within {self.timeout_ms} ms; send it again "
            "with the same idempotency_key",
            code="not_durable",
        )


def _name(client: Redis) -> str:
    address = client.connection_pool.connection_kwargs
    return str(address.get("path") or f"{address.get('host')}:{address.get('port')}")


def _online(replica: Any) -> bool:
    """An INFO replication `slaveN` entry (ip, port, state, offset, lag) of a replica copying its master."""
    return isinstance(replica, dict) and replica.get("state") == "online"


async def confirm(connection: Redis) -> None:
    """Wait until this connection's writes are fsynced to the AOF."""
    fsynced, _ = await connection.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
    if int(fsynced) < 1:
        raise ServiceUnavailable(
            f"the work is queued, but Redis did not confirm it on disk within {WAITAOF_TIMEOUT_MS} ms; send it again "
            "with the same idempotency_key",
            code="not_durable",
        )


async def durability_of(redis: Redis, mode: Literal["strict", "fast"], probe_key: str, replica_wait_ms: int) -> Durability:
    """How this Redis makes inserts durable in `mode`; NotDurable when strict mode cannot be had on it.

    Its configuration decides where it can be read: `appendfsync always` (and no pause of fsyncs during rewrites)
    is on disk before each reply, and nothing else is strict, WAITAOF included (with everysec, some servers confirm
    an fsync they have not done: redis/redis#13793; with no, never). Where CONFIG is refused (managed Redis), a write
    to `probe_key` followed by WAITAOF tells whether the server confirms fsyncs. A strict insert on a master with a
    replica online waits up to `replica_wait_ms` for one to have it."""
    if mode == "fast":
        return Durability()
    # On a Redis Cluster, every primary: each holds the queues of its slots.
    nodes = redis.get_primaries() if isinstance(redis, RedisCluster) else [None]
    for node in nodes:
        where: dict[str, ClusterNode] = {} if node is None else {"target_nodes": node}
        try:
            config = await redis.config_get("append*", **where) | await redis.config_get("no-appendfsync-on-rewrite", **where)
        except ResponseError:
            if node is not None:
                raise NotDurable(
                    "WLM_DURABILITY=strict, but a Redis Cluster node refuses CONFIG GET, so whether it fsyncs before it "
                    f"replies cannot be checked: allow CONFIG GET, or {FAST_INSTEAD}"
                ) from None
            return await _probed(redis, probe_key, replica_wait_ms)
        settings = (config.get("appendonly"), config.get("appendfsync"), config.get("no-appendfsync-on-rewrite"))
        if settings != ("yes", "always", "no"):
            server = "Redis" if node is None else f"the Redis Cluster node {node.name}"
            raise NotDurable(
                f"WLM_DURABILITY=strict answers an insert only once it is on disk, but {server} runs with appendonly "
                f"{settings[0]}, appendfsync {settings[1]} and no-appendfsync-on-rewrite {settings[2]}: {HOW_TO_FIX}"
            )
    return Durability(replicas=Replicas(replica_wait_ms))


async def _probed(redis: Redis, probe_key: str, replica_wait_ms: int) -> Durability:
    async with redis.client() as connection:
        await connection.incr(probe_key)
        try:
            await confirm(connection)
        except ResponseError:
            log.warning(
                "WLM_DURABILITY=strict, but Redis refuses CONFIG GET and has no WAITAOF: whether an insert is on disk "
                "before it is answered cannot be verified (it is if Redis runs with appendonly yes and appendfsync always)"
            )
            return Durability(replicas=Replicas(replica_wait_ms))
        except ServiceUnavailable as exc:
            raise NotDurable(
                f"WLM_DURABILITY=strict, but Redis does not confirm that writes reach its disk (WAITAOF): {HOW_TO_FIX}"
            ) from exc
    return Durability(waitaof=True, replicas=Replicas(replica_wait_ms))


class DeferredDurability(Durability):
    """Strict mode where Redis did not answer at startup (the service starts, not ready, and waits for it): the Redis
    is checked at the first insert instead, which is refused (503 not_durable) while it cannot be strict."""

    def __init__(self, mode: Literal["strict", "fast"], probe_key: str, replica_wait_ms: int) -> None:
        super().__init__()
        self.mode, self.probe_key, self.replica_wait_ms = mode, probe_key, replica_wait_ms
        self._checked: Durability | None = None

    async def run(self, scripts: Scripts, redis: Redis, call: ScriptCall) -> list[Any]:
        if self._checked is None:
            try:
                self._checked = await durability_of(redis, self.mode, self.probe_key, self.replica_wait_ms)
            except NotDurable as exc:
                log.error("%s", exc)
                raise ServiceUnavailable(str(exc), code="not_durable") from exc
        return await self._checked.run(scripts, redis, call)


async def durability_at_start(redis: Redis, mode: Literal["strict", "fast"], probe_key: str, replica_wait_ms: int) -> Durability:
    """`durability_of` now, or at the first insert if Redis does not answer yet."""
    try:
        return await durability_of(redis, mode, probe_key, replica_wait_ms)
    except UNAVAILABLE as exc:
        log.warning("Redis does not answer (%s): its durability is checked at the first insert", exc)
        return DeferredDurability(mode, probe_key, replica_wait_ms)
