"""The transitions of a work request's life on the queues, one script each: a server registers; requests are
inserted, selected (and begun), begun, extended, ended, deleted, purged and given back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, cast

from app.errors import AppError, lua_error
from app.queues import script_specs as specs
from app.queues.base import AeConfig, GroupCap, StoreBase
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys, queue_name
from app.queues.request_meta import RequestMeta
from app.queues.resource_groups import (
    GroupsInCall,
    ResourceGroups,
    ended_members,
    group_by_class,
    groups_of,
    member_of,
    preferred_order,
)
from app.queues.sweep import SweptQueues, removal_keys
from app.queues.tombstones import tombstone_field

# Each select brings back at most this many blobs before it answers (with what it has, possibly nothing).
UNSWEEPS_PER_SELECT = 3


# The records made per request of a batch (hundreds per call) are plain dataclasses, not frozen: a frozen one's
# __init__ sets each field through object.__setattr__, about a microsecond more per record (timeit, 3-6 fields).


@dataclass(slots=True)
class NewRequest:
    id: str
    service_class: str
    dependent: bool
    meta: RequestMeta
    payload: str  # JSON text
    idempotency_key: str | None


@dataclass(slots=True)
class Selected:
    id: str
    meta: RequestMeta
    payload: str


@dataclass(slots=True)
class EndResult:
    code: ReturnCode  # OK: ended; otherwise why not (app.errors maps it)
    value: str  # the work record (JSON) when ended, else the code's detail
    _record: RequestMeta | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def record(self) -> RequestMeta:
        """Parsed once: a grouped select reads it for the slot to free, and the router for its answer. (Not a
        cached_property: on Python 3.11 that takes a lock at each first read, which cost more than the parse.)"""
        if self._record is None:
            self._record = RequestMeta.from_json(self.value)
        return self._record


@dataclass(frozen=True, slots=True)
class SelectResult:
    ended: list[EndResult]  # one per requested end, in order; they applied whatever `refusal` says
    items: list[Selected]
    status: ReturnCode  # OK, or why nothing could be selected (not registered, at capacity, overflow not needed, surplus)
    refusal: AppError | None  # the error `status` stands for
    short: frozenset[int] = frozenset()  # the groups (numbers in the call) whose work it left for lack of slots


@dataclass(frozen=True, slots=True)
class Reassigned:
    requeued: int
    abandoned: list[str]


@dataclass(slots=True)
class EndArgs:
    request_id: str
    outcome: str
    result: str | None = None  # JSON text
    error: str | None = None  # the server's last error text, kept with a dead letter
    dead_letter: bool = False  # a failed request goes to the dead letters
    life: int = 1  # the life its token names: an earlier life's end is told it ended (lua/includes/end_held.lua)


@dataclass(frozen=True, slots=True)
class Budgets:
    """What resource groups granted a select: per class its group's number (0: none), then per group its slots."""

    group_of_class: list[int]
    slots: list[int]


NO_BUDGETS = Budgets([], [])


def _end_args(ends: Sequence[EndArgs]) -> list[str | int | bytes]:
    """Per end, the seven values end_held (lua/includes/end_held.lua) reads."""
    return [
        value
        for end in ends
        for value in (
            end.request_id,
            end.outcome,
            end.result or "",
            end.error or "",
            "1" if end.dead_letter else "",
            end.life,
            tombstone_field(end.request_id),
        )
    ]


# The codes by value: a lookup, where ReturnCode(value) costs each end of a batch most of a microsecond.
_CODE_OF = {code.value: code for code in ReturnCode}


def _end_results(flat: Sequence[Any]) -> list[EndResult]:
    return [EndResult(_CODE_OF[int(flat[i])], str(flat[i + 1])) for i in range(0, len(flat), 2)]


class RequestQueues(StoreBase):
    # The parts the hot path calls on, over this base (built at their first use: then an attribute like any other).
    @cached_property
    def sweep(self) -> SweptQueues:
        """The swept parts of queues: the sweeper's steps, and blobs brought back."""
        return SweptQueues(self)

    @cached_property
    def groups(self) -> ResourceGroups:
        """The resource groups' slots."""
        return ResourceGroups(self)

    async def register_server(self, k: AeKeys, server_id: int, worker_tasks: int, worker_weight: int, overflow: bool) -> None:
        value = json.dumps({"tasks": worker_tasks, "weight": worker_weight, "overflow": overflow})
        await self.scripts.run(specs.REGISTER([k.servers, k.seen], [server_id, value]))

    async def insert(self, k: AeKeys, queue_manager: int, requests: Sequence[NewRequest], backlog_limit: int) -> list[str]:
        """All or none; returns the ids in order (an earlier id where an idempotency key repeats). The queues and the
        metadata a batch's requests share are given once each, and each request names them by number (insert.lua)."""
        queues: dict[str, int] = {}
        queue_keys: list[str] = []
        queue_args: list[str] = []
        metas: dict[bytes, int] = {}
        encoded: dict[int, bytes] = {}  # by record: a batch's requests mostly share one (app/work/insert.py)
        item_keys: list[str] = []
        item_args: list[Any] = []
        for request in requests:
            queue = queue_name(request.service_class, request.dependent)
            queue_number = queues.get(queue)
            if queue_number is None:
                queue_number = queues[queue] = len(queues) + 1
                queue_keys += [k.front(queue), k.rear(queue)]
                queue_args += [queue, request.service_class]
            meta = encoded.get(id(request.meta))
            if meta is None:
                meta = encoded[id(request.meta)] = request.meta.to_json()
            item_keys.append(k.idempotency(queue_manager, request.idempotency_key) if request.idempotency_key else k.no_idempotency)
            item_args += [request.id, queue_number, metas.setdefault(meta, len(metas) + 1), request.payload, request.idempotency_key or ""]
        call = specs.INSERT(
            [k.req, k.payload, k.depth, k.classes, k.places, k.swept, k.sweeping, k.waiters],
            [k.notify_channel, k.wake_prefix, self.idempotency_ttl_s, backlog_limit, len(queues), len(metas)],
            key_groups=[queue_keys, item_keys],
            arg_groups=[queue_args, list(metas), item_args],
        )
        ids = await self.durability.run(self.scripts, self.redis, call)
        return [str(v) for v in ids]

    async def select(
        self,
        k: AeKeys,
        config: AeConfig,
        server_id: int,
        max_items: int,
        *,
        begin: bool,
        ends: Sequence[EndArgs] = (),
        waiter: str = "",
    ) -> SelectResult:
        """End `ends`, then select (and begin, if `begin`), in one script call. When the queue to take from goes on
        in the database, its next blob comes back and the select is tried again (the ends were applied). A
        long-polling server's `waiter` is listed for inserts to wake when nothing was selected, and unlisted
        otherwise (wake in lua/includes/wake.lua). Classes in resource groups take their groups' slots in the same
        call on one Redis (select_grouped.lua), else before it and settle them after (resource_groups.py)."""
        groups = groups_of(config)
        if not groups or self.groups.settled_in_call(groups):
            order = list(zip(config.class_order, config.tiers, strict=True))
            in_call = self.groups.in_call(config.class_order, group_by_class(config)) if groups else None
            return await self._select(
                k, order, config.completion_time_ms, server_id, max_items, begin=begin, ends=ends, waiter=waiter, in_call=in_call
            )
        group_of = group_by_class(config)
        ended: list[EndResult] = []
        if ends and self.groups.short.intersection(group.name for group in groups):
            # A group that came short at its last take: the ends go first, so that the slots they free count here.
            ended, ends = await self.end(k, server_id, ends, group_of), ()
        grants = await self.groups.take_slots(groups, max_items, config.completion_time_ms)
        if ends and any(grant.granted < max_items for grant in grants):
            # A group short of what the select asks: the ends go first after all, in a call of their own, and the
            # slots they free (with the reservation, given back) are taken again, so that they count for this select.
            ended = await self.end(k, server_id, ends)
            freed = ended_members(k, group_of, [result.record for result in ended if result.code is ReturnCode.OK])
            await self.groups.settle_all(grants, {}, freed)
            grants = await self.groups.take_slots(groups, max_items, config.completion_time_ms)
            ends = ()
        taken: dict[GroupCap, list[str]] = {}
        released: dict[GroupCap, list[str]] = {}
        short: dict[GroupCap, str] = {}
        try:
            order = preferred_order(config, grants)
            number = {grant.group.name: n for n, grant in enumerate(grants, 1)}
            budgets = Budgets([number[group_of[sc].name] if sc in group_of else 0 for sc, _ in order], [grant.granted for grant in grants])
            result = await self._select(
                k, order, config.completion_time_ms, server_id, max_items, begin=begin, ends=ends, waiter=waiter, budgets=budgets
            )
            for item in result.items:
                if (group := group_of.get(item.meta.service_class)) is not None:
                    taken.setdefault(group, []).append(member_of(k, item.id, item.meta))
            released = ended_members(k, group_of, [end.record for end in result.ended if end.code is ReturnCode.OK])
            short = {grant.group: k.notify_channel for grant in grants if number[grant.group.name] in result.short}
        finally:
            # The slots used hold what was taken, the rest go back, the ends' slots are freed, and the select is listed
            # where it left a group's work for lack of slots: one call per group.
            await self.groups.settle_all(grants, taken, released, short)
        return replace(result, ended=ended) if ended else result

    async def _select(
        self,
        k: AeKeys,
        order: Sequence[tuple[str, int]],
        lease_ms: int,
        server_id: int,
        max_items: int,
        *,
        begin: bool,
        ends: Sequence[EndArgs] = (),
        waiter: str = "",
        budgets: Budgets = NO_BUDGETS,
        in_call: GroupsInCall | None = None,
    ) -> SelectResult:
        """`select` in the class order given (each class with its tier: see select.lua), with the groups' `budgets`
        if any, or the groups it takes and settles itself (`in_call`: select_grouped.lua)."""
        keys = [k.req, k.payload, k.depth, k.leases, k.inflight, k.servers, k.seen, k.records, k.exits, *k.tombstone_keys, k.samples]
        keys += [k.assign, k.retire, k.swept, k.served, k.waiters, k.served_at, k.dead, k.dead_at, k.buckets, k.histograms]
        keys.append(k.promotion)
        classes, tiers = [sc for sc, _ in order], [tier for _, tier in order]
        key_groups: list[Sequence[str]] = [k.class_queues(classes)]
        group_args: list[Sequence[Any]] = [budgets.group_of_class, budgets.slots]
        fixed_after: list[Any] = []
        if in_call is None:
            spec = specs.SELECT_AND_BEGIN if begin else specs.SELECT
        else:
            spec = specs.SELECT_AND_BEGIN_GROUPED if begin else specs.SELECT_GROUPED
            key_groups.append(in_call.keys)
            group_args = [in_call.group_of_class, in_call.max_in_flight]
            fixed_after = [len(in_call.max_in_flight), k.member_prefix, k.notify_channel]
        ended: list[EndResult] | None = None
        short: frozenset[int] = frozenset()
        for _ in range(UNSWEEPS_PER_SELECT + 1):
            args: list[Any] = [
                server_id,
                lease_ms,
                max_items,
                self.tombstone_ms,
                self.samples_ms,
                self.dead_letter_ms,
                waiter,
                self.promotion_ms,
                self.promotion_share,
                len(ends),
                *fixed_after,
            ]
            arg_groups: list[Sequence[Any]] = [_end_args(ends), classes, tiers, *group_args]
            flat = await self.scripts.call(spec(keys, args, key_groups=key_groups, arg_groups=arg_groups))
            status, after_ends = ReturnCode(int(flat[0])), 3 + 2 * int(flat[1])
            if ended is None:
                ended = _end_results(flat[3:after_ends])
            rest = flat[after_ends:]
            short = frozenset(int(number) for number in flat[2].split(",")) if flat[2] else frozenset()
            if status is ReturnCode.FRONT_SWEPT:
                await self.sweep.unsweep(k, str(rest[0]))
                ends = ()
                continue
            if status is not ReturnCode.OK:
                return SelectResult(ended, [], status, lua_error(status, rest))
            items = [Selected(rest[i], RequestMeta.from_json(rest[i + 1]), rest[i + 2]) for i in range(0, len(rest), 3)]
            return SelectResult(ended, items, status, None, short)
        assert ended is not None
        return SelectResult(ended, [], ReturnCode.OK, None, short)

    async def unlist_waiter(self, k: AeKeys, waiter: str) -> None:
        """A long poll that ends without work takes its waiter off the list inserts wake."""
        await self.redis.zrem(k.waiters, waiter)

    async def begin(self, k: AeKeys, config: AeConfig, request_id: str, server_id: int, life: int = 1) -> int:
        """Returns when the request's completion time ends (ms, Redis's clock). `life`: the one its token names."""
        args = [request_id, server_id, config.completion_time_ms, life]
        (lease_ends_ms,) = await self.scripts.run(specs.BEGIN([k.req, k.leases, *k.tombstone_keys], args))
        return int(lease_ends_ms)

    async def extend(self, k: AeKeys, config: AeConfig, server_id: int) -> int:
        result = await self.scripts.run(specs.EXTEND([k.req, k.leases, k.seen], [server_id, config.completion_time_ms]))
        return int(result[0])

    async def end(
        self, k: AeKeys, server_id: int, ends: Sequence[EndArgs], groups: Mapping[str, GroupCap] | None = None
    ) -> list[EndResult]:
        """End requests of one server; each succeeds or fails on its own. Those of a class in `groups` (class ->
        its resource group) free their slots: in the same call on one Redis (end_grouped.lua)."""
        keys = [k.req, k.payload, k.leases, k.inflight, k.records, k.exits, *k.tombstone_keys, k.samples, k.dead, k.dead_at]
        keys += [k.buckets, k.histograms]
        args = [server_id, self.tombstone_ms, self.samples_ms, self.dead_letter_ms]
        in_call = self.groups.in_call(list(groups), groups) if groups else None
        if in_call is not None:
            call = specs.END_GROUPED(
                keys,
                [*args, len(ends), k.member_prefix],
                key_groups=[in_call.keys],
                arg_groups=[_end_args(ends), list(groups or ()), in_call.group_of_class, in_call.max_in_flight],
            )
            return _end_results(await self.scripts.run(call))
        results = _end_results(await self.scripts.run(specs.END(keys, args, arg_groups=[_end_args(ends)])))
        if groups:
            await self.groups.release_ended(k, groups, [result.record for result in results if result.code is ReturnCode.OK])
        return results

    async def delete(self, k: AeKeys, request_id: str, queue_manager: int) -> RequestMeta:
        """Delete a queued request, in memory or swept; returns its work record."""
        args = [queue_manager, request_id, self.tombstone_ms]
        for _ in range(2):  # a swept request whose blob came back meanwhile is deleted from memory the second time
            result = await self.scripts.call(specs.DELETE_QUEUED(removal_keys(k), args))
            code = int(result[0])
            not_in_memory = code == ReturnCode.UNKNOWN_WORK and len(result) == 1  # not {UNKNOWN_WORK, 'foreign'}
            if not_in_memory and self.blobs is not None and await self.redis.hlen(k.swept):
                code, result = await self.sweep.remove_swept(k, request_id, queue_manager, "deleted")
                if code == ReturnCode.NOT_SWEPT:
                    continue
            if code != ReturnCode.OK:
                raise lua_error(code, result[1:])
            return RequestMeta.from_json(result[1])
        raise lua_error(ReturnCode.UNKNOWN_WORK, [])

    async def purge(self, k: AeKeys, queue_manager: int, page: int = 1000) -> int:
        """Every queued request of a disconnected queue manager, in memory (a page per script call) and swept."""
        cursor, purged = "0", 0
        while True:
            call = specs.PURGE_QUEUED(removal_keys(k), [queue_manager, cursor, page, self.tombstone_ms])
            cursor, count = await self.scripts.run(call)
            purged += int(count)
            if str(cursor) == "0":
                break
        if self.blobs is not None and await self.redis.hlen(k.swept):
            for blob_id, request_ids in (await self.blobs.of_queue_manager(k, queue_manager)).items():
                entries = await self.blobs.read(blob_id) or []
                for request_id in request_ids:
                    code, _ = await self.sweep.remove_swept(k, request_id, queue_manager, "purged", entries)
                    purged += code == ReturnCode.OK  # the others ended already, or came back to memory (the next purge)
            for queue in cast(list[str], await self.redis.hkeys(k.swept)):
                await self.sweep.drop_emptied_blobs(k, queue)
        return purged

    async def reassign(self, k: AeKeys, config: AeConfig, *, server_id: int | None = None, batch: int = 500, epoch: int = 0) -> Reassigned:
        """Expired leases (server_id None: a batch of them) or everything a departing server holds, back to the front
        of the queue. `epoch`: the scheduler's fencing token when this is its duty (refused, as Fenced, once a newer
        one acted)."""
        classes = await self.known_classes(k, config)
        keys = [k.req, k.payload, k.depth, k.leases, k.inflight, k.servers, k.records, k.exits, *k.tombstone_keys, k.seen, k.fence]
        keys += [k.waiters, k.served_at, k.dead, k.dead_at, k.swept, k.places, k.holes]
        args = [config.max_deliveries, self.tombstone_ms, k.notify_channel, k.wake_prefix, epoch]
        spec, which = (specs.REASSIGN_EXPIRED, batch) if server_id is None else (specs.REASSIGN_SERVER, server_id)
        call = spec(keys, [*args, which, self.dead_letter_ms], key_groups=[k.class_queues(classes)], arg_groups=[classes])
        result = await self.scripts.run(call)
        return Reassigned(int(result[0]), [str(v) for v in result[2:]])

    async def known_classes(self, k: AeKeys, config: AeConfig) -> list[str]:
        """The policy's service classes and any class that ever queued here (a policy may have dropped it)."""
        return sorted(set(config.class_order) | cast(set[str], await self.redis.smembers(k.classes)))
