"""The swept parts of queues (TPF's slow queue sweeper: docs/sweeper.md) through the queue store on a real Redis,
with blobs kept in memory: the sweeper's begin, commit and abort; bringing blobs back; deleting and purging requests
in them; and every return code of those scripts."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import Fenced, NotFound
from app.queues import script_specs as specs
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.sweep import PendingSweep
from app.redis.script_spec import ScriptCall
from tests.queues.conftest import CONFIG, OTHER_QUEUE_MANAGER, QUEUE_MANAGER, SERVER, MemoryBlobs, meta_of, request, tombstone_of
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both

QUEUE = "ONLINE:ind"


async def swept(store: QueueStore, k: AeKeys, blobs: MemoryBlobs, *, count: int = 3, keep: int = 0, epoch: int = 1) -> list[str]:
    """`count` requests queued, all but the first `keep` swept into one blob; returns the ids in queue order."""
    ids = await store.insert(k, QUEUE_MANAGER, [request() for _ in range(count)], CONFIG.backlog_limit)
    pending = await store.sweep.begin(k, QUEUE, "front", keep, count, "token", epoch)
    assert [entry.id for entry in pending.entries] == ids[keep:]
    assert await store.sweep.commit(pending, [await blobs.write(k, QUEUE, pending.entries)]) == count - keep
    return ids


async def test_a_sweep_moves_the_front_out_of_memory_and_new_requests_queue_behind_it(store, k, blobs):
    ids = await swept(store, k, blobs, keep=1)
    sizes = await store.sweep.queue_sizes(k, QUEUE)
    assert (sizes.front, sizes.rear, sizes.chain, sizes.swept) == (1, 0, [1], 2)
    assert await store.redis.hmget(k.req, ids) == [await store.redis.hget(k.req, ids[0]), None, None]
    (later,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    assert await store.redis.lrange(k.rear(QUEUE), 0, -1) == [later]


async def test_select_brings_the_next_blob_back_when_the_front_is_swept(store, k, blobs):
    ids = await swept(store, k, blobs)
    (later,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    result = await store.select(k, CONFIG, SERVER, 5, begin=False)
    assert [item.id for item in result.items] == [*ids, later]
    assert blobs.blobs == {}
    assert await store.redis.hlen(k.swept) == 0


async def test_a_blob_another_process_restored_first_is_not_restored_twice(store, k, blobs):
    await swept(store, k, blobs)
    entries = await blobs.read(1)
    assert await store.sweep.restore(k, QUEUE, 1, entries) == 3
    assert await store.sweep.restore(k, QUEUE, 1, entries) == 0  # BLOB_RESTORED
    assert await store.redis.llen(k.front(QUEUE)) == 3


async def test_a_sweep_that_raced_with_a_select_is_aborted(store, k, blobs):
    ids = await store.insert(k, QUEUE_MANAGER, [request() for _ in range(3)], CONFIG.backlog_limit)
    pending = await store.sweep.begin(k, QUEUE, "front", 0, 3, "token", 1)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    assert item.id == ids[0]
    assert await store.sweep.commit(pending, [await blobs.write(k, QUEUE, pending.entries)]) is None  # SWEEP_ABORTED
    assert await store.redis.lrange(k.front(QUEUE), 0, -1) == ids[1:]
    assert (await store.sweep.queue_sizes(k, QUEUE)).chain == []


async def test_an_aborted_sweep_leaves_the_queue_as_it_was(store, k, blobs):
    ids = await store.insert(k, QUEUE_MANAGER, [request() for _ in range(2)], CONFIG.backlog_limit)
    pending = await store.sweep.begin(k, QUEUE, "front", 0, 2, "token", 1)
    assert await store.redis.hexists(k.sweeping, QUEUE)
    await store.sweep.abort(PendingSweep(k, QUEUE, "front", "another sweep's token", 1, []))
    assert await store.redis.hexists(k.sweeping, QUEUE)
    await store.sweep.abort(pending)
    assert not await store.redis.hexists(k.sweeping, QUEUE)
    assert await store.sweep.commit(pending, []) is None
    assert await store.redis.lrange(k.front(QUEUE), 0, -1) == ids


async def test_a_sweep_is_fenced_once_a_newer_scheduler_acted(store, k, blobs):
    await swept(store, k, blobs, epoch=2)
    await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    with pytest.raises(Fenced) as fenced:
        await store.sweep.begin(k, QUEUE, "rear", 0, 1, "older", 1)
    assert fenced.value.details == {"epoch": 2}
    pending = PendingSweep(k, QUEUE, "rear", "older", 1, [])
    for step in (store.sweep.commit(pending, []), store.sweep.abort(pending)):
        with pytest.raises(Fenced):
            await step


async def test_a_swept_request_is_deleted_in_its_blob_and_left_out_when_it_comes_back(store, k, blobs):
    ids = await swept(store, k, blobs)
    record = await store.delete(k, ids[1], QUEUE_MANAGER)
    assert record["id"] == ids[1] and record["outcome"] == "deleted"
    assert await tombstone_of(store, k, ids[1]) == f"deleted|{QUEUE_MANAGER}"
    with pytest.raises(NotFound):  # another queue manager's request is not revealed
        await store.delete(k, ids[0], OTHER_QUEUE_MANAGER)
    assert await store.sweep.unsweep(k, QUEUE) == 2
    assert await store.redis.lrange(k.front(QUEUE), 0, -1) == [ids[0], ids[2]]
    assert await store.redis.smembers(k.swept_deleted) == set()


async def test_a_delete_that_finds_the_blob_brought_back_meanwhile_deletes_it_from_memory(store, k, blobs, monkeypatch):
    ids = await swept(store, k, blobs)
    locate = blobs.locate

    async def brought_back_meanwhile(keys: AeKeys, request_id: str) -> tuple[int, str] | None:
        located = await locate(keys, request_id)
        restored = [value for e in await blobs.read(1) for value in (e.id, e.meta, e.payload)]
        keys = [k.req, k.payload, k.front(QUEUE), k.chain(QUEUE), k.swept, k.swept_deleted, k.places]
        await store.scripts.run(specs.UNSWEEP(keys, [QUEUE, 1], arg_groups=[restored]))
        return located  # the blob is still indexed: delete_swept answers NOT_SWEPT, and the delete goes again

    monkeypatch.setattr(blobs, "locate", brought_back_meanwhile)
    answers: list[tuple[str, int]] = []
    call = store.scripts.call

    async def recorded(script: ScriptCall, client: Any = None) -> list[Any]:
        result = await call(script, client)
        answers.append((script.script, int(result[0])))
        return result

    monkeypatch.setattr(store.scripts, "call", recorded)
    record = await store.delete(k, ids[0], QUEUE_MANAGER)
    expected = [("delete_queued", ReturnCode.UNKNOWN_WORK), ("delete_swept", ReturnCode.NOT_SWEPT), ("delete_queued", ReturnCode.OK)]
    assert [answer for answer in answers if answer[0].startswith("delete")] == expected
    assert record["outcome"] == "deleted"
    assert await meta_of(store, k, ids[0]) is None and await meta_of(store, k, ids[1]) is not None


async def test_purge_reaches_swept_requests_and_drops_emptied_blobs(store, k, blobs):
    await swept(store, k, blobs)
    assert await store.purge(k, QUEUE_MANAGER) == 3
    assert (await store.redis.hlen(k.req), await store.redis.hlen(k.swept), await store.redis.llen(k.records)) == (0, 0, 3)
    assert (await store.sweep.queue_sizes(k, QUEUE)).chain == []
    assert blobs.blobs == {}


async def test_service_rates_count_selects_since_the_last_call(store, k):
    assert await store.sweep.take_service_rates(k) == (None, {})
    await store.insert(k, QUEUE_MANAGER, [request(), request()], CONFIG.backlog_limit)
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 5, begin=False)
    elapsed_ms, counts = await store.sweep.take_service_rates(k)
    assert elapsed_ms is not None and elapsed_ms >= 0 and counts == {QUEUE: 2}


async def test_another_queue_managers_request_in_memory_is_not_looked_for_among_the_swept(store, k, blobs, monkeypatch):
    """The script knows it is in memory: the database holding the blobs is not asked (it may be down)."""
    ids = await swept(store, k, blobs, keep=1)
    asked: list[str] = []

    async def locate(keys: AeKeys, request_id: str) -> tuple[int, str] | None:
        asked.append(request_id)
        return None

    monkeypatch.setattr(blobs, "locate", locate)
    with pytest.raises(NotFound):
        await store.delete(k, ids[0], OTHER_QUEUE_MANAGER)
    assert asked == []
    with pytest.raises(NotFound):  # not in memory: it may be swept, so the blobs are asked
        await store.delete(k, "no-such-request", QUEUE_MANAGER)
    assert asked == ["no-such-request"]
