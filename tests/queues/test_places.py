"""A request's place in its queue and its status (lua/includes/places.lua, lua/status.lua) through the queue store on
a real Redis: how many requests of its class queue are ahead of it, read without walking the queue, matches the queue
as it is, through inserts, selects, deletes, requests given back, dead letters retried, sweeps and blobs brought
back; and what the status says of requests held, ended, dead and unknown."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest

from app.queues.base import AeConfig
from app.queues.keys import AeKeys, queue_name
from app.queues.request_status import DeadStatus, EndedStatus, LiveStatus
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from tests.queues.conftest import QUEUE_MANAGER, SERVER, MemoryBlobs, request
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both

CONFIG = AeConfig(class_order=("ONLINE", "BATCH"), completion_time_ms=30_000, backlog_limit=10**6, max_deliveries=2)
CLASSES = [("ONLINE", 0), ("BATCH", 1)]


def FAILED(request_id: str) -> EndArgs:  # noqa: N802 - an end, as the constants beside it
    return EndArgs(request_id, "failed", error="broke", dead_letter=True)


async def queued(store: QueueStore, k: AeKeys, count: int, service_class: str = "ONLINE", dependent: bool = False) -> list[str]:
    requests = [request(service_class, dependent=dependent) for _ in range(count)]
    return await store.insert(k, QUEUE_MANAGER, requests, CONFIG.backlog_limit)


async def ahead(store: QueueStore, k: AeKeys, request_id: str) -> int | None:
    status = await store.statuses.get(k, CLASSES, request_id)
    assert isinstance(status, LiveStatus)
    return status.ahead


async def in_order(store: QueueStore, k: AeKeys, blobs: MemoryBlobs, service_class: str) -> list[str]:
    """The class queue's queued requests in the order selects take them, found by walking every part of it: dependent
    then independent, each its front list, its blobs, its rear list."""
    order: list[str] = []
    for dependent in (True, False):
        queue = queue_name(service_class, dependent)
        deleted = await store.redis.smembers(k.swept_deleted)
        chain = [int(blob) for blob in await store.redis.lrange(k.chain(queue), 0, -1)]
        swept = [entry.id for blob in chain for entry in blobs.blobs[blob][2] if entry.id not in deleted]
        for part in (await store.redis.lrange(k.front(queue), 0, -1), swept, await store.redis.lrange(k.rear(queue), 0, -1)):
            metas = await store.redis.hmget(k.req, part) if part and part is not swept else []
            order += [i for i, raw in zip(part, metas, strict=True) if raw and '"state":"q"' in raw] if part is not swept else part
    return order


async def check_every_position(store: QueueStore, k: AeKeys, blobs: MemoryBlobs) -> int:
    checked = 0
    for service_class, _ in CLASSES:
        order = await in_order(store, k, blobs, service_class)
        assert [await ahead(store, k, request_id) for request_id in order] == list(range(len(order)))
        checked += len(order)
    return checked


async def test_the_requests_ahead_are_its_class_queues_dependent_ones_then_those_queued_before_it(store, k, blobs):
    independent = await queued(store, k, 3)
    dependent = await queued(store, k, 2, dependent=True)
    other = await queued(store, k, 1, "BATCH")
    assert [await ahead(store, k, i) for i in dependent] == [0, 1]
    assert [await ahead(store, k, i) for i in independent] == [2, 3, 4]
    assert [await ahead(store, k, i) for i in other] == [0]


async def test_a_select_or_a_delete_moves_those_behind_up(store, k, blobs):
    ids = await queued(store, k, 5)
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    await store.delete(k, ids[2], QUEUE_MANAGER)
    assert item.id == ids[0]
    assert [await ahead(store, k, i) for i in (ids[1], ids[3], ids[4])] == [0, 1, 2]
    await store.delete(k, ids[1], QUEUE_MANAGER)  # the head: its entry stays first in the list until a select
    assert [await ahead(store, k, i) for i in (ids[3], ids[4])] == [0, 1]


async def test_requests_given_back_go_ahead_in_their_order_whenever_they_come_back(store, k, blobs):
    ids = await queued(store, k, 4)
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 2, begin=True)
    for request_id in (ids[0], ids[1]):  # each on its own pass: the second one comes back first
        await store.redis.zadd(k.leases, {request_id: 0})
        await store.reassign(k, CONFIG)
    assert await store.redis.lrange(k.front("ONLINE:ind"), 0, -1) == [ids[1], ids[0], ids[2], ids[3]]
    assert [await ahead(store, k, i) for i in (ids[1], ids[0], ids[2], ids[3])] == [0, 1, 2, 3]


async def test_the_status_of_a_held_an_ended_a_dead_and_an_unknown_request(store, k, blobs):
    ids = await queued(store, k, 3)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items
    held = await store.statuses.get(k, CLASSES, ids[0])
    assert isinstance(held, LiveStatus) and held.meta.state.word == "begun" and held.ahead is None and not held.swept
    assert (held.servers.connected, held.servers.worker_tasks, held.servers.held, held.servers.free_worker_tasks) == (1, 1, 1, 0)
    waiting = await store.statuses.get(k, CLASSES, ids[1])
    assert isinstance(waiting, LiveStatus) and waiting.servers.holding_equal_or_higher and not waiting.servers.holding_lower
    other = await queued(store, k, 1, "BATCH")
    assert (await store.statuses.get(k, CLASSES, other[0])).servers.holding_equal_or_higher  # type: ignore[union-attr]

    await store.delete(k, ids[2], QUEUE_MANAGER)
    deleted = await store.statuses.get(k, CLASSES, ids[2])
    assert isinstance(deleted, EndedStatus) and (deleted.outcome, deleted.queue_manager) == ("deleted", QUEUE_MANAGER)
    await store.end(k, SERVER, [FAILED(item.id)])
    dead = await store.statuses.get(k, CLASSES, item.id)
    assert isinstance(dead, DeadStatus) and (dead.reason, dead.meta.outcome, dead.meta.deliveries) == ("failed", "failed", 1)
    assert await store.statuses.get(k, CLASSES, "nothing-like-it") is None


async def test_a_request_queued_before_places_were_given_makes_its_queue_unknown_until_it_leaves(store, k, blobs):
    (old,) = await queued(store, k, 1)
    raw = await store.redis.hget(k.req, old)
    await store.redis.hset(k.req, old, raw.replace('"place":1,"seq":1,', '"seq":7,'))
    (new,) = await queued(store, k, 1)
    assert await ahead(store, k, new) is None
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 1, begin=False)
    assert await ahead(store, k, new) == 0


async def test_the_holes_before_where_a_queue_begins_are_forgotten(store, k, blobs):
    ids = await queued(store, k, 6)
    for request_id in ids[:3]:
        await store.delete(k, request_id, QUEUE_MANAGER)
    assert await store.redis.zcard(k.holes) == 3
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 1, begin=False)  # drops the three entries and takes ids[3]
    await store.reassign(k, CONFIG)  # the lease duty's pass
    assert await store.redis.zcard(k.holes) == 0
    await store.delete(k, ids[5], QUEUE_MANAGER)
    await store.select(k, CONFIG, SERVER, 1, begin=False)
    await store.reassign(k, CONFIG)  # nothing queued: every hole of the queue goes
    assert await store.redis.zcard(k.holes) == 0


@dataclass
class Walk:
    """A random walk over a queue's life, a step at a time, keeping what the steps need."""

    store: QueueStore
    k: AeKeys
    blobs: MemoryBlobs
    rng: random.Random
    held: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)

    async def insert(self) -> None:
        service_class = self.rng.choice(["ONLINE", "BATCH"])
        await queued(self.store, self.k, self.rng.randint(1, 4), service_class, dependent=self.rng.random() < 0.3)

    async def select(self) -> None:
        result = await self.store.select(self.k, CONFIG, SERVER, self.rng.randint(1, 3), begin=False)
        self.held += [item.id for item in result.items]

    async def end(self) -> None:
        if self.held:
            request_id = self.held.pop(self.rng.randrange(len(self.held)))
            failed = self.rng.random() < 0.3
            await self.store.end(self.k, SERVER, [FAILED(request_id) if failed else EndArgs(request_id, "completed")])
            if failed:
                self.dead.append(request_id)

    async def give_back(self) -> None:
        if self.held:
            chosen = self.rng.sample(self.held, self.rng.randint(1, len(self.held)))
            await self.store.redis.zadd(self.k.leases, dict.fromkeys(chosen, 0))
            result = await self.store.reassign(self.k, CONFIG)
            self.held = [i for i in self.held if i not in chosen]
            self.dead += result.abandoned

    async def retry(self) -> None:
        if self.dead:
            request_id = self.dead.pop(self.rng.randrange(len(self.dead)))
            await self.store.dead_letters.retry(self.k, request_id, self.rng.choice(["front", "back"]))

    async def delete(self) -> None:
        everything = [i for sc, _ in CLASSES for i in await in_order(self.store, self.k, self.blobs, sc)]
        if everything:
            await self.store.delete(self.k, self.rng.choice(everything), QUEUE_MANAGER)

    async def sweep(self) -> None:
        queue = queue_name(self.rng.choice(["ONLINE", "BATCH"]), self.rng.random() < 0.3)
        part = self.rng.choice(["front", "rear"])
        pending = await self.store.sweep.begin(self.k, queue, part, self.rng.randint(0, 3), self.rng.randint(1, 8), "token", 0)
        live = [entry for entry in pending.entries if entry.meta]
        blob_ids = [await self.blobs.write(self.k, queue, live[i : i + 3]) for i in range(0, len(live), 3)]
        await self.store.sweep.commit(pending, blob_ids)

    async def unsweep(self) -> None:
        chained = [q for sc, _ in CLASSES for d in (True, False) if await self.store.redis.llen(self.k.chain(q := queue_name(sc, d)))]
        if chained:
            await self.store.sweep.unsweep(self.k, self.rng.choice(chained))


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_position_matches_the_queue_as_it_is_through_a_random_walk(store, k, blobs, seed):
    walk = Walk(store, k, blobs, random.Random(seed))
    await store.register_server(k, SERVER, worker_tasks=6, worker_weight=1, overflow=False)
    steps = [walk.insert] * 4 + [walk.select, walk.end, walk.give_back, walk.retry, walk.delete, walk.sweep, walk.unsweep]
    checked = 0
    for _ in range(120):
        await walk.rng.choice(steps)()
        checked += await check_every_position(store, k, blobs)
    assert checked > 500  # the walk kept queues of some length


async def test_a_request_given_back_while_the_front_is_swept_goes_before_the_swept_part(store, k, blobs):
    ids = await queued(store, k, 5)
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    pending = await store.sweep.begin(k, "ONLINE:ind", "front", 0, 4, "token", 0)
    await store.sweep.commit(pending, [await blobs.write(k, "ONLINE:ind", pending.entries)])
    assert await store.redis.llen(k.front("ONLINE:ind")) == 0  # the whole queue is in the database
    await store.redis.zadd(k.leases, {item.id: 0})
    await store.reassign(k, CONFIG)
    assert [await ahead(store, k, i) for i in ids] == [0, 1, 2, 3, 4]
    await store.sweep.unsweep(k, "ONLINE:ind")
    assert [await ahead(store, k, i) for i in ids] == [0, 1, 2, 3, 4]


async def test_a_long_run_of_deleted_requests_at_the_head_makes_positions_unknown_until_a_select_drops_it(store, k, blobs):
    ids = await queued(store, k, 36)
    for request_id in ids[:33]:  # more than a reader looks at (PLACE_SCAN)
        await store.delete(k, request_id, QUEUE_MANAGER)
    assert await ahead(store, k, ids[34]) is None
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    assert item.id == ids[33] and [await ahead(store, k, i) for i in ids[34:]] == [0, 1]


async def test_the_number_a_version_before_places_sorts_by_is_written_too(store, k, blobs):
    """A rolling upgrade's older replica sorts the requests it gives back by `seq`: every request has one."""
    ids = await queued(store, k, 2)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 2, begin=False)
    await store.redis.zadd(k.leases, dict.fromkeys(ids, 0))
    await store.reassign(k, CONFIG)
    metas = [json.loads(raw) for raw in await store.redis.hmget(k.req, ids)]
    # Given back to an empty queue: at its back, in their order (3, then 2 before it).
    assert [(meta["place"], meta["seq"]) for meta in metas] == [(2, 2), (3, 3)]
