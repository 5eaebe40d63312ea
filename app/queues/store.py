"""Typed operations on the queues of one application environment on one node, each one Lua script."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from app.errors import AppError, ServiceUnavailable, lua_error
from app.policy.active import ActivePolicy
from app.queues.durability import Durability
from app.queues.keys import AeKeys, queue_name, retired_key, server_limits_key
from app.queues.scripts import Scripts
from app.sweeper.blobs import SweptBlobs, SweptEntry

# Return codes of the swept-queue scripts the store handles itself (app/errors.py names them).
FRONT_SWEPT, BLOB_RESTORED, NOT_SWEPT, SWEEP_ABORTED, UNKNOWN = -13, -14, -15, -16, -1
# Each select brings back at most this many blobs before it answers (with what it has, possibly nothing).
UNSWEEPS_PER_SELECT = 3


def redis_time_ms(time: tuple[int, int]) -> int:
    """Redis's TIME (seconds, microseconds) in milliseconds, as common.lua's now_ms() reads it."""
    seconds, micros = time
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass(frozen=True, slots=True)
class AeConfig:
    """What the scripts need to know of an environment's definition."""

    class_order: tuple[str, ...]
    completion_time_ms: int
    backlog_limit: int
    max_deliveries: int

    @classmethod
    def of(cls, policy: ActivePolicy, application_environment: str) -> AeConfig | None:
        ae = policy.application_environments.get(application_environment)
        if ae is None:
            return None
        return cls(policy.class_order, ae.completion_time_ms, ae.backlog_limit, ae.max_deliveries)


@dataclass(frozen=True, slots=True)
class NewRequest:
    id: str
    service_class: str
    dependent: bool
    meta: dict[str, Any]
    payload: str  # JSON text
    idempotency_key: str | None


@dataclass(frozen=True, slots=True)
class Selected:
    id: str
    meta: dict[str, Any]
    payload: str


@dataclass(frozen=True, slots=True)
class EndResult:
    code: int  # 0: ended; otherwise the script's error code (app.errors maps it)
    value: str  # the work record (JSON) when ended, else the code's detail

    @property
    def record(self) -> dict[str, Any]:
        return json.loads(self.value)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class SelectResult:
    ended: list[EndResult]  # one per requested end, in order; they applied whatever `refusal` says
    items: list[Selected]
    refusal: AppError | None  # why nothing could be selected (not registered, at capacity, overflow not needed)


@dataclass(frozen=True, slots=True)
class EndSample:
    service_class: str
    response_ms: int  # insert to end
    queue_ms: int  # insert to the select of the delivery that ended
    execution_ms: int  # that select to end


@dataclass(frozen=True, slots=True)
class Reassigned:
    requeued: int
    abandoned: list[str]


EndArgs = tuple[str, str, str | None]  # request id, outcome, result (JSON text)


def _end_args(ends: Sequence[EndArgs]) -> list[str]:
    return [value for request_id, outcome, result in ends for value in (request_id, outcome, result or "")]


def _end_results(flat: Sequence[Any]) -> list[EndResult]:
    return [EndResult(int(flat[i]), str(flat[i + 1])) for i in range(0, len(flat), 2)]


@dataclass(frozen=True, slots=True)
class Retired:
    """An environment removed while its queues may still hold something: the duties finish it (see QueueStore.retire)."""

    keys: AeKeys
    config: AeConfig
    queue_manager: int  # whose queued work is purged there
    since_ms: int
    member: str


@dataclass(frozen=True, slots=True)
class QueueSizes:
    """One queue's parts (entries of deleted requests included until a select or sweep drops them)."""

    front: int
    rear: int
    chain: list[int]  # blob ids, in queue order
    swept: int  # requests in those blobs


@dataclass(frozen=True, slots=True)
class PendingSweep:
    """A sweep begun (app/sweeper): `entries` are being written to a blob while the queue goes on."""

    keys: AeKeys
    queue: str
    part: str  # 'front' or 'rear'
    token: str
    epoch: int
    entries: list[SweptEntry]  # in queue order; meta '' for an entry of a deleted request


class QueueStore:
    def __init__(
        self,
        redis: Redis,
        prefix: str,
        *,
        idempotency_ttl_s: int,
        tombstone_ms: int,
        samples_ms: int,
        blobs: SweptBlobs | None = None,
        durability: Durability | None = None,
    ) -> None:
        """`blobs`: where swept parts of queues are (None: this store never sweeps, nor finds anything swept).
        `durability`: how an insert is on disk before it returns (app/queues/durability.py; None: once in memory)."""
        self.redis = redis
        self.prefix = prefix
        self.scripts = Scripts(redis)
        self.blobs = blobs
        self.durability = durability or Durability()
        self.idempotency_ttl_s = idempotency_ttl_s
        self.tombstone_ms = tombstone_ms
        self.samples_ms = samples_ms  # how long ended requests are kept as samples for goal evaluation

    def keys(self, node: str, ae: str) -> AeKeys:
        return AeKeys(self.prefix, node, ae)

    async def clock_ms(self) -> int:
        """Now by Redis's clock, the one every script stamps with: instants compared with what the scripts wrote
        (leases, heartbeats, tombstones, due times) are taken here, never from this process's clock."""
        return redis_time_ms(await self.redis.time())

    async def register_server(self, k: AeKeys, server_id: int, worker_tasks: int, worker_weight: int, overflow: bool) -> None:
        value = json.dumps({"tasks": worker_tasks, "weight": worker_weight, "overflow": overflow})
        await self.scripts.run("register", [k.servers, k.seen], [server_id, value])

    async def silent_servers(self, k: AeKeys, silent_ms: int) -> list[int]:
        """Servers registered here that neither selected nor heartbeat for `silent_ms`."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.seen)
            pipe.time()
            seen, now = await pipe.execute()
        limit = redis_time_ms(now) - silent_ms
        return [int(sid) for sid, at in seen.items() if int(at) < limit]

    async def insert(self, k: AeKeys, queue_manager: int, requests: Sequence[NewRequest], backlog_limit: int) -> list[str]:
        """All or none; returns the ids in order (an earlier id where an idempotency key repeats)."""
        keys = [k.req, k.payload, k.depth, k.classes, k.seq, k.swept, k.sweeping]
        args: list[Any] = [k.notify_channel, self.idempotency_ttl_s, backlog_limit]
        for request in requests:
            queue = queue_name(request.service_class, request.dependent)
            keys += [k.front(queue), k.rear(queue)]
            keys.append(k.idempotency(queue_manager, request.idempotency_key) if request.idempotency_key else k.no_idempotency)
            args += [request.id, request.service_class, orjson.dumps(request.meta), request.payload, request.idempotency_key or "", queue]
        ids = await self.durability.write(self.redis, lambda client: self.scripts.run("insert", keys, args, client))
        return [str(v) for v in ids]

    async def select(
        self, k: AeKeys, config: AeConfig, server_id: int, max_items: int, *, begin: bool, ends: Sequence[EndArgs] = ()
    ) -> SelectResult:
        """End `ends` (id, outcome, result JSON), then select, in one script call. When the queue to take from goes on
        in the database, its next blob comes back and the select is tried again (the ends were applied)."""
        keys = [k.req, k.payload, k.depth, k.leases, k.inflight, k.servers, k.seen, k.records, k.exits, k.done, k.done_exp, k.samples]
        keys += [k.assign, k.retire, k.swept, k.served, *k.class_queues(list(config.class_order))]
        ended: list[EndResult] | None = None
        for _ in range(UNSWEEPS_PER_SELECT + 1):
            args: list[Any] = [server_id, config.completion_time_ms, max_items, "1" if begin else "0", self.tombstone_ms, self.samples_ms]
            args.append(len(ends))
            args += _end_args(ends)
            args += config.class_order
            flat = await self.scripts.call("select", keys, args)
            status, after_ends = int(flat[0]), 2 + 2 * int(flat[1])
            if ended is None:
                ended = _end_results(flat[2:after_ends])
            rest = flat[after_ends:]
            if status == FRONT_SWEPT:
                await self.unsweep(k, str(rest[0]))
                ends = ()
                continue
            if status < 0:
                return SelectResult(ended, [], lua_error(status, rest))
            items = [Selected(rest[i], orjson.loads(rest[i + 1]), rest[i + 2]) for i in range(0, len(rest), 3)]
            return SelectResult(ended, items, None)
        assert ended is not None
        return SelectResult(ended, [], None)

    async def unsweep(self, k: AeKeys, queue: str) -> int:
        """Bring a swept queue's first blob back behind its front; returns how many requests came back (0 when
        another process did it first)."""
        assert self.blobs is not None, "a queue is swept, but this store knows no blobs"
        chain = k.chain(queue)
        blob_id = await self.redis.lindex(chain, 0)  # type: ignore[misc]
        if blob_id is None:
            return 0
        entries = await self.blobs.read(int(blob_id))
        if entries is None:
            if await self.redis.lindex(chain, 0) != blob_id:  # type: ignore[misc]
                return 0  # brought back and forgotten meanwhile
            raise ServiceUnavailable("a swept part of the queue is missing from the database", code="swept_blob_missing", queue=queue)
        return await self.restore(k, queue, int(blob_id), entries)

    async def restore(self, k: AeKeys, queue: str, blob_id: int, entries: list[SweptEntry]) -> int:
        """Put a blob's requests back behind the front if it is still the chain's first, and forget it; returns how
        many came back (0 when another process restored it first)."""
        assert self.blobs is not None
        args: list[Any] = [queue, blob_id]
        for entry in entries:
            args += [entry.id, entry.meta, entry.payload]
        result = await self.scripts.call("unsweep", [k.req, k.payload, k.front(queue), k.chain(queue), k.swept, k.swept_deleted], args)
        if int(result[0]) == BLOB_RESTORED:
            return 0
        await self.blobs.forget([blob_id])
        return int(result[1])

    async def begin(self, k: AeKeys, config: AeConfig, request_id: str, server_id: int) -> int:
        """Returns when the request's completion time ends (ms, Redis's clock)."""
        args = [request_id, server_id, config.completion_time_ms]
        (lease_ends_ms,) = await self.scripts.run("begin", [k.req, k.leases, k.done], args)
        return int(lease_ends_ms)

    async def extend(self, k: AeKeys, config: AeConfig, server_id: int) -> int:
        result = await self.scripts.run("extend", [k.req, k.leases, k.seen], [server_id, config.completion_time_ms])
        return int(result[0])

    async def end(self, k: AeKeys, server_id: int, ends: Sequence[EndArgs]) -> list[EndResult]:
        """End (id, outcome, result JSON) requests of one server; each succeeds or fails on its own."""
        keys = [k.req, k.payload, k.leases, k.inflight, k.records, k.exits, k.done, k.done_exp, k.samples]
        args = [server_id, self.tombstone_ms, self.samples_ms, *_end_args(ends)]
        return _end_results(await self.scripts.run("end", keys, args))

    async def retire(self, k: AeKeys, config: AeConfig, queue_manager: int) -> None:
        """Remember an environment that left (a dynamic one whose queue manager disconnected) until its queues are
        drained: the duties no longer find it in the policy, yet its records must be written, its exits called,
        held work ended or abandoned, and work a stale cache let in purged."""
        member = json.dumps({"node": k.node, "ae": k.ae, "qm": queue_manager})
        await self.redis.hset(retired_key(self.prefix), member, json.dumps({"config": asdict(config), "since": await self.clock_ms()}))

    async def retired(self) -> list[Retired]:
        result = []
        for member, value in (await self.redis.hgetall(retired_key(self.prefix))).items():
            where, what = json.loads(member), json.loads(value)
            config = what["config"] | {"class_order": tuple(what["config"]["class_order"])}
            result.append(Retired(self.keys(where["node"], where["ae"]), AeConfig(**config), where["qm"], what["since"], member))
        return result

    async def drained(self, k: AeKeys) -> bool:
        """Nothing queued (in memory or swept) or held, no record to write, no exit to call."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hlen(k.req)
            pipe.hlen(k.swept)
            pipe.llen(k.records)
            pipe.zcard(k.exits)
            return not any(await pipe.execute())

    async def forget_retired(self, retired: Retired) -> None:
        await self.redis.hdel(retired_key(self.prefix), retired.member)

    def _removal_keys(self, k: AeKeys) -> list[str]:
        return [k.req, k.payload, k.depth, k.records, k.exits, k.done, k.done_exp]

    async def delete(self, k: AeKeys, request_id: str, queue_manager: int) -> dict[str, Any]:
        """Delete a queued request, in memory or swept; returns its work record."""
        args = ["delete", queue_manager, request_id, 0, self.tombstone_ms]
        for _ in range(2):  # a swept request whose blob came back meanwhile is deleted from memory the second time
            result = await self.scripts.call("remove_queued", self._removal_keys(k), args)
            code = int(result[0])
            if code == UNKNOWN and self.blobs is not None and await self.redis.hlen(k.swept):  # type: ignore[misc]
                code, result = await self._remove_swept(k, request_id, queue_manager, "deleted")
                if code == NOT_SWEPT:
                    continue
            if code < 0:
                raise lua_error(code, result[1:])
            return json.loads(result[1])  # type: ignore[no-any-return]
        raise lua_error(UNKNOWN, [])

    async def _remove_swept(self, k: AeKeys, request_id: str, queue_manager: int, outcome: str, blob: list[SweptEntry] | None = None) -> tuple[int, list[Any]]:
        """Delete or purge a request that is in a blob: the script's code and values (UNKNOWN when it is in none)."""
        assert self.blobs is not None
        located = await self.blobs.locate(k, request_id)
        if located is None:
            return UNKNOWN, [UNKNOWN]
        blob_id, queue = located
        entries = blob if blob is not None else await self.blobs.read(blob_id)
        entry = next((e for e in entries or () if e.id == request_id), None)
        if entry is None:
            return UNKNOWN, [UNKNOWN]
        keys = [*self._removal_keys(k), k.chain(queue), k.swept, k.swept_deleted]
        args = [outcome, queue_manager, self.tombstone_ms, queue, blob_id, request_id, entry.meta]
        result = await self.scripts.call("delete_swept", keys, args)
        return int(result[0]), result

    async def purge(self, k: AeKeys, queue_manager: int, page: int = 1000) -> int:
        """Every queued request of a disconnected queue manager, in memory (a page per script call) and swept."""
        cursor, purged = "0", 0
        while True:
            args = ["purge", queue_manager, cursor, page, self.tombstone_ms]
            cursor, count = await self.scripts.run("remove_queued", self._removal_keys(k), args)
            purged += int(count)
            if str(cursor) == "0":
                break
        if self.blobs is not None and await self.redis.hlen(k.swept):  # type: ignore[misc]
            for blob_id, request_ids in (await self.blobs.of_queue_manager(k, queue_manager)).items():
                entries = await self.blobs.read(blob_id) or []
                for request_id in request_ids:
                    code, _ = await self._remove_swept(k, request_id, queue_manager, "purged", entries)
                    purged += code == 0  # the others ended already, or came back to memory (the next purge)
            for queue in await self.redis.hkeys(k.swept):  # type: ignore[misc]
                await self._drop_emptied_blobs(k, queue)
        return purged

    async def _drop_emptied_blobs(self, k: AeKeys, queue: str) -> None:
        """Bring back the blobs at the head of a chain whose requests were all deleted or purged: nothing comes
        back, and an environment whose queues a purge emptied holds nothing any more."""
        assert self.blobs is not None
        while (head := await self.redis.lindex(k.chain(queue), 0)) is not None:  # type: ignore[misc]
            entries = await self.blobs.read(int(head)) or []
            if entries and not all(await self.redis.smismember(k.swept_deleted, [e.id for e in entries])):  # type: ignore[misc]
                return
            await self.unsweep(k, queue)

    async def reassign(self, k: AeKeys, config: AeConfig, *, server_id: int | None = None, batch: int = 500, epoch: int = 0) -> Reassigned:
        """Expired leases (server_id None) or everything a departing server holds, back to the front of the queue.
        `epoch`: the scheduler's fencing token when this is its duty (refused, as Fenced, once a newer one acted)."""
        classes = await self.known_classes(k, config)
        keys = [k.req, k.payload, k.depth, k.leases, k.inflight, k.servers, k.records, k.exits, k.done, k.done_exp, k.seen, k.fence]
        keys += k.class_lists(classes)
        mode = "expired" if server_id is None else "server"
        args = [
            mode,
            server_id if server_id is not None else "",
            config.max_deliveries,
            self.tombstone_ms,
            batch,
            k.notify_channel,
            epoch,
            *classes,
        ]
        result = await self.scripts.run("reassign", keys, args)
        return Reassigned(int(result[0]), [str(v) for v in result[2:]])

    async def known_classes(self, k: AeKeys, config: AeConfig) -> list[str]:
        """The policy's service classes and any class that ever queued here (a policy may have dropped it)."""
        return sorted(set(config.class_order) | set(await self.redis.smembers(k.classes)))  # type: ignore[misc]

    async def samples(self, k: AeKeys, since_ms: int) -> list[EndSample]:
        """Requests ended (by their server) at or after `since_ms`, for goal evaluation."""
        result = []
        for n, member in enumerate(await self.redis.zrangebyscore(k.samples, since_ms, "+inf"), 1):
            service_class, response, queue, execution, _ = str(member).split("|", 4)
            result.append(EndSample(service_class, int(response), int(queue), int(execution)))
            if n % 1000 == 0:
                await asyncio.sleep(0)  # thousands of samples: let the requests waiting on this process through
        return result

    async def classes_in_use(self, k: AeKeys) -> set[str]:
        """Service classes with requests queued or held in this environment."""
        queued = {sc for sc, depth in (await self.redis.hgetall(k.depth)).items() if int(depth) > 0}
        held_ids = await self.redis.zrange(k.leases, 0, -1)
        held = {orjson.loads(meta)["sc"] for meta in await self.redis.hmget(k.req, held_ids) if meta} if held_ids else set()
        return queued | held

    async def pending_records(self, k: AeKeys, limit: int) -> tuple[str, int, list[str]]:
        """The outbox's incarnation ('' if it is empty and has none yet), the position of its first record and its
        first `limit` records, read together (lua/pending_records.lua)."""
        keys = [k.records, k.records_acked, k.records_incarnation]
        incarnation, acked, entries = await self.scripts.run("pending_records", keys, [limit, uuid.uuid4().hex[:16]])
        return str(incarnation), int(acked), [str(v) for v in entries]

    async def record_termination(self, k: AeKeys, who: str, window_ms: int) -> tuple[float, list[float]]:
        """Count an unexpected termination now (`who`: a server id, or a launched process's instance, so that
        one process counts once); returns now and the times of those within the window (s, Redis's clock)."""
        now = await self.clock_ms()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(k.terminations, {who: now})
            pipe.zremrangebyscore(k.terminations, "-inf", now - window_ms)
            pipe.zrange(k.terminations, 0, -1, withscores=True)
            *_, recent = await pipe.execute()
        return now / 1000, [score / 1000 for _, score in recent]

    async def server_limits(self, ae: str) -> str | None:
        """The limits IWM4SLI set for an environment (JSON), if any."""
        return await self.redis.get(server_limits_key(self.prefix, ae))  # type: ignore[no-any-return]

    async def set_server_limits(self, ae: str, limits: str) -> None:
        await self.redis.set(server_limits_key(self.prefix, ae), limits)

    async def reset_server_limits(self, ae: str) -> bool:
        return bool(await self.redis.delete(server_limits_key(self.prefix, ae)))

    async def retire_servers(self, k: AeKeys, server_ids: Sequence[int]) -> None:
        """Tell these servers to end at their next select (0C14), before the manager's next decision."""
        if server_ids:
            await self.redis.sadd(k.retire, *[str(server_id) for server_id in server_ids])

    async def note_start_error(self, k: AeKeys, error: Mapping[str, Any], keep_s: int) -> None:
        await self.redis.set(k.start_error, json.dumps(error), ex=keep_s)

    async def clear_start_error(self, k: AeKeys) -> None:
        await self.redis.delete(k.start_error)

    async def hold_lease(self, key: str, owner: str, ms: int) -> bool:
        """Take or keep, for `ms`, a duty that one process at a time should do (flushing an outbox, launching
        servers). Not a fence: at the lease's end two holders can overlap for a moment, so what is leased this way
        must stay correct done twice (an outbox batch written twice is read once: readers drop duplicates)."""
        if await self.redis.set(key, owner, nx=True, px=ms):
            return True
        if await self.redis.get(key) == owner:
            await self.redis.pexpire(key, ms)
            return True
        return False

    async def ack_records(self, k: AeKeys, records: Sequence[str]) -> int:
        result = await self.scripts.run("ack_records", [k.records, k.records_acked], [len(records), records[0], records[-1]])
        return int(result[0])

    async def claim_exits(self, k: AeKeys, claim_ms: int, limit: int) -> list[str]:
        return [str(v) for v in await self.scripts.run("claim_exits", [k.exits], [claim_ms, limit])]

    async def settle_exit(self, k: AeKeys, entry: str, retry: str | None, delay_ms: int) -> None:
        """Delivered or given up (retry None), else replaced by its next attempt `delay_ms` from now, in one
        transaction."""
        due_ms = await self.clock_ms() + delay_ms if retry is not None else 0
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(k.exits, entry)
            if retry is not None:
                pipe.zadd(k.exits, {retry: due_ms})
            await pipe.execute()

    async def forget_tombstones(self, k: AeKeys, page: int = 1000) -> None:
        """Every expired tombstone, a page per transaction, so cleaning keeps up with any rate of ends."""
        now = await self.clock_ms()
        while expired := await self.redis.zrangebyscore(k.done_exp, "-inf", now, start=0, num=page):
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hdel(k.done, *expired)
                pipe.zrem(k.done_exp, *expired)
                await pipe.execute()
            if len(expired) < page:
                return

    # ---- the slow queue sweeper's steps (app/sweeper) ---------------------------------------------------------

    async def take_service_rates(self, k: AeKeys) -> tuple[int | None, dict[str, int]]:
        """Requests selected per queue since the last call, and how long that was (ms, Redis's clock; None on the
        first call); the count starts again."""
        elapsed_ms, *flat = await self.scripts.run("take_served", [k.served], [])
        return (int(elapsed_ms) if elapsed_ms != "" else None), {str(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}

    async def queue_sizes(self, k: AeKeys, queue: str) -> QueueSizes:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.llen(k.front(queue))
            pipe.llen(k.rear(queue))
            pipe.lrange(k.chain(queue), 0, -1)
            pipe.hget(k.swept, queue)
            front, rear, chain, swept = await pipe.execute()
        return QueueSizes(front, rear, [int(b) for b in chain], int(swept or 0))

    def _sweep_keys(self, k: AeKeys, queue: str) -> list[str]:
        return [k.req, k.payload, k.front(queue), k.rear(queue), k.chain(queue), k.swept, k.sweeping, k.fence]

    async def sweep_begin(self, k: AeKeys, queue: str, part: str, keep: int, count: int, token: str, epoch: int) -> PendingSweep:
        """Mark the queue as being swept and read what to move: the last `count` of its front beyond the first
        `keep` (part 'front'), or the first `count` of its rear."""
        flat = await self.scripts.run("sweep", self._sweep_keys(k, queue), ["begin", queue, token, epoch, part, keep, count])
        entries = [SweptEntry(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        return PendingSweep(k, queue, part, token, epoch, entries)

    async def sweep_commit(self, sweep: PendingSweep, blob_ids: list[int]) -> int | None:
        """Move the entries out, their blobs (in order; none when all were of deleted requests) joining the chain;
        None when the sweep raced with a select, delete or change of one of them (aborted: the queue is as it was)."""
        args = ["commit", sweep.queue, sweep.token, sweep.epoch, *blob_ids]
        result = await self.scripts.call("sweep", self._sweep_keys(sweep.keys, sweep.queue), args)
        code = int(result[0])
        if code == SWEEP_ABORTED:
            return None
        if code < 0:
            raise lua_error(code, result[1:])
        return int(result[1])

    async def sweep_abort(self, sweep: PendingSweep) -> None:
        await self.scripts.run("sweep", self._sweep_keys(sweep.keys, sweep.queue), ["abort", sweep.queue, sweep.token, sweep.epoch])
