"""The swept parts of queues (after TPF MQSeries': docs/sources.md; app/sweeper): the sweeper's steps around writing a blob to the database,
and bringing blobs back, or deleting requests in them, for the hot path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import ServiceUnavailable, lua_error
from app.queues import script_specs as specs
from app.queues.base import StorePart
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.swept_blobs import SweptEntry


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


def removal_keys(k: AeKeys) -> list[str]:
    """The keys a delete or purge of queued requests names first, in memory (the hot path's) or swept."""
    return [k.req, k.payload, k.depth, k.records, k.exits, *k.tombstone_keys, k.holes]


class SweptQueues(StorePart):
    # ---- the slow queue sweeper's steps (app/sweeper) ---------------------------------------------------------

    async def take_service_rates(self, k: AeKeys) -> tuple[int | None, dict[str, int]]:
        """Requests selected per queue since the last call, and how long that was (ms, Redis's clock; None on the
        first call); the count starts again."""
        elapsed_ms, *flat = await self.scripts.run(specs.TAKE_SERVED([k.served]))
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
        return [k.req, k.payload, k.front(queue), k.rear(queue), k.chain(queue), k.swept, k.sweeping, k.fence, k.places]

    async def begin(self, k: AeKeys, queue: str, part: str, keep: int, count: int, token: str, epoch: int) -> PendingSweep:
        """Mark the queue as being swept and read what to move: the last `count` of its front beyond the first
        `keep` (part 'front'), or the first `count` of its rear."""
        flat = await self.scripts.run(specs.SWEEP_BEGIN(self._sweep_keys(k, queue), [queue, token, epoch, part, keep, count]))
        entries = [SweptEntry(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        return PendingSweep(k, queue, part, token, epoch, entries)

    async def commit(self, sweep: PendingSweep, blob_ids: list[int]) -> int | None:
        """Move the entries out, their blobs (in order; none when all were of deleted requests) joining the chain;
        None when the sweep raced with a select, delete or change of one of them (aborted: the queue is as it was)."""
        args = [sweep.queue, sweep.token, sweep.epoch]
        result = await self.scripts.call(specs.SWEEP_COMMIT(self._sweep_keys(sweep.keys, sweep.queue), args, arg_groups=[blob_ids]))
        code = int(result[0])
        if code == ReturnCode.SWEEP_ABORTED:
            return None
        if code != ReturnCode.OK:
            raise lua_error(code, result[1:])
        return int(result[1])

    async def abort(self, sweep: PendingSweep) -> None:
        await self.scripts.run(specs.SWEEP_ABORT(self._sweep_keys(sweep.keys, sweep.queue), [sweep.queue, sweep.token, sweep.epoch]))

    # ---- what the hot path does with swept queues -------------------------------------------------------------

    async def unsweep(self, k: AeKeys, queue: str) -> int:
        """Bring a swept queue's first blob back behind its front; returns how many requests came back (0 when
        another process did it first)."""
        assert self.base.blobs is not None, "a queue is swept, but this store knows no blobs"
        chain = k.chain(queue)
        blob_id = await self.redis.lindex(chain, 0)
        if blob_id is None:
            return 0
        entries = await self.base.blobs.read(int(blob_id))
        if entries is None:
            if await self.redis.lindex(chain, 0) != blob_id:
                return 0  # brought back and forgotten meanwhile
            raise ServiceUnavailable("a swept part of the queue is missing from the database", code="swept_blob_missing", queue=queue)
        return await self.restore(k, queue, int(blob_id), entries)

    async def restore(self, k: AeKeys, queue: str, blob_id: int, entries: list[SweptEntry]) -> int:
        """Put a blob's requests back behind the front if it is still the chain's first, and forget it; returns how
        many came back (0 when another process restored it first)."""
        assert self.base.blobs is not None
        restored = [value for entry in entries for value in (entry.id, entry.meta, entry.payload)]
        keys = [k.req, k.payload, k.front(queue), k.chain(queue), k.swept, k.swept_deleted, k.places]
        result = await self.scripts.call(specs.UNSWEEP(keys, [queue, blob_id], arg_groups=[restored]))
        if int(result[0]) == ReturnCode.BLOB_RESTORED:
            return 0
        await self.base.blobs.forget([blob_id])
        return int(result[1])

    async def remove_swept(
        self, k: AeKeys, request_id: str, queue_manager: int, outcome: str, blob: list[SweptEntry] | None = None
    ) -> tuple[int, list[Any]]:
        """Delete or purge a request that is in a blob: the script's code and values (UNKNOWN_WORK when it is in none)."""
        assert self.base.blobs is not None
        located = await self.base.blobs.locate(k, request_id)
        if located is None:
            return ReturnCode.UNKNOWN_WORK, [ReturnCode.UNKNOWN_WORK]
        blob_id, queue = located
        entries = blob if blob is not None else await self.base.blobs.read(blob_id)
        entry = next((e for e in entries or () if e.id == request_id), None)
        if entry is None:
            return ReturnCode.UNKNOWN_WORK, [ReturnCode.UNKNOWN_WORK]
        keys = [*removal_keys(k), k.chain(queue), k.swept, k.swept_deleted]
        args = [outcome, queue_manager, self.base.tombstone_ms, queue, blob_id, request_id, entry.meta]
        result = await self.scripts.call(specs.DELETE_SWEPT(keys, args))
        return int(result[0]), result

    async def drop_emptied_blobs(self, k: AeKeys, queue: str) -> None:
        """Bring back the blobs at the head of a chain whose requests were all deleted or purged: nothing comes
        back, and an environment whose queues a purge emptied holds nothing any more."""
        assert self.base.blobs is not None
        while (head := await self.redis.lindex(k.chain(queue), 0)) is not None:
            entries = await self.base.blobs.read(int(head)) or []
            if entries and not all(await self.redis.smismember(k.swept_deleted, [e.id for e in entries])):
                return
            await self.unsweep(k, queue)
