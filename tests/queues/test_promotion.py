"""No work starved (starved_class in lua/includes/promotion.lua), in the queue store on a real Redis: a request queued past the
promotion time is selected ahead of more important work, as often as the share of selects allows; a class at its
resource group's cap is not promoted; dependent work goes first within the promoted class; a swept class's blob
comes back to be promoted; and a select with nothing due looks at no queue."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.queues.base import GroupCap
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, Selected
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, MemoryBlobs, meta_of, request
from tests.waiting import eventually

PROMOTION_MS = 200
CAPPED = GroupCap("CAPPED", max_in_flight=1, min_in_flight=None)
GROUPED = replace(CONFIG, backlog_limit=100, class_ranks=(1, 3), class_groups=(None, CAPPED))


@pytest.fixture
def promoting(store: QueueStore) -> QueueStore:
    """The store with a promotion time tests can wait for."""
    store.promotion_ms = PROMOTION_MS
    return store


async def _queued(store: QueueStore, k: AeKeys, service_class: str, count: int = 1, *, dependent: bool = False) -> list[str]:
    requests = [request(service_class, dependent=dependent) for _ in range(count)]
    return await store.insert(k, QUEUE_MANAGER, requests, 10**6)


async def _past_promotion_time(store: QueueStore, k: AeKeys, request_id: str) -> None:
    """Wait until Redis's clock says `request_id` has been queued longer than the promotion time."""
    meta = await meta_of(store, k, request_id)
    assert meta is not None
    due = meta["inserted"] + PROMOTION_MS
    await eventually(lambda: _now_after(store, due), 10, what=f"{request_id} queued past the promotion time")


async def _now_after(store: QueueStore, ms: int) -> bool:
    return await store.clock_ms() > ms


async def _one(store: QueueStore, k: AeKeys, config=CONFIG, ends: list[str] = ()) -> Selected:  # type: ignore[assignment]
    result = await store.select(k, config, SERVER, 1, begin=True, ends=[EndArgs(i, "completed") for i in ends])
    [item] = result.items
    return item


async def test_a_request_queued_past_the_promotion_time_goes_ahead_of_more_important_work(promoting, k):
    store = promoting
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    [batch] = await _queued(store, k, "BATCH")
    online = await _queued(store, k, "ONLINE", 3)
    first = await _one(store, k)
    if first.id == online[0]:  # selected before the promotion time passed: importance first, not promoted
        assert "promoted" not in first.meta
        await _past_promotion_time(store, k, batch)
        first = await _one(store, k)
    assert first.id == batch and first.meta["promoted"] is True
    # The bucket is spent: importance order again, for 1 / share selects.
    assert [(await _one(store, k)).id for _ in range(2)] == online[-2:]
    assert await store.redis.hget(k.promotion, "promoted|BATCH") == "1"


async def test_the_work_record_says_promoted_of_the_delivery_that_ended(promoting, k):
    store = promoting
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    [batch] = await _queued(store, k, "BATCH")
    [online] = await _queued(store, k, "ONLINE")
    await _past_promotion_time(store, k, batch)
    assert (await _one(store, k)).meta["promoted"] is True
    [ended] = await store.end(k, SERVER, [EndArgs(batch, "completed")])
    assert ended.record["promoted"] is True and ended.record["id"] == batch
    # Given back after a promotion, then selected in the importance order: that delivery was not promoted.
    [again] = await _queued(store, k, "BATCH")
    await _past_promotion_time(store, k, again)
    await store.redis.hset(k.promotion, "tokens", 1)
    assert (await _one(store, k)).meta["promoted"] is True
    assert (await store.reassign(k, CONFIG, server_id=SERVER)).requeued == 1  # as when the server left
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    await store.redis.hset(k.promotion, "tokens", 0)
    assert [(await _one(store, k)).id for _ in range(2)] == [online, again]
    [ended] = await store.end(k, SERVER, [EndArgs(again, "completed")])
    assert "promoted" not in ended.record and ended.record["deliveries"] == 2


async def test_over_n_selects_at_most_1_plus_share_times_n_are_promoted(promoting, k):
    store, share, selects = promoting, 0.1, 60
    store.promotion_share = share
    await store.register_server(k, SERVER, worker_tasks=selects, worker_weight=1, overflow=False)
    await _queued(store, k, "ONLINE", selects)
    batch = await _queued(store, k, "BATCH", 20)
    await _past_promotion_time(store, k, batch[-1])
    promoted = [n for n in range(selects) if (await _one(store, k)).meta.get("promoted")]
    assert len(promoted) <= 1 + share * selects
    # The bucket starts full; then each select adds a tenth of a token: one promotion every tenth select.
    assert promoted == [0, 10, 20, 30, 40, 50]
    assert await store.redis.hget(k.promotion, "promoted|BATCH") == "6"


async def test_a_class_at_its_group_s_cap_is_not_promoted(promoting, k):
    store = promoting
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    [held] = await _queued(store, k, "BATCH")
    assert (await _one(store, k, GROUPED)).id == held  # the group's one slot
    [starved] = await _queued(store, k, "BATCH")
    await _queued(store, k, "ONLINE", 2)
    await _past_promotion_time(store, k, starved)
    passed_over = await _one(store, k, GROUPED)
    assert passed_over.meta["sc"] == "ONLINE" and "promoted" not in passed_over.meta
    assert await store.redis.hget(k.promotion, "promoted|BATCH") is None
    # Its slot freed, it is promoted (the look that found it capped waits the promotion time at most).
    ends = [held, passed_over.id]

    async def promoted_now() -> Selected | None:
        await _queued(store, k, "ONLINE")
        item = await _one(store, k, GROUPED, ends)
        ends[:] = [item.id]
        return item if item.id == starved else None

    item = await eventually(promoted_now, 10, what="the capped class's request promoted once its slot is free")
    assert item.meta["promoted"] is True


async def test_dependent_work_goes_first_within_the_promoted_class(promoting, k):
    store = promoting
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    [independent] = await _queued(store, k, "BATCH")
    [dependent] = await _queued(store, k, "BATCH", dependent=True)
    await _queued(store, k, "ONLINE", 3)
    await _past_promotion_time(store, k, independent)
    item = await _one(store, k)
    assert item.id == dependent and item.meta["promoted"] is True


async def test_a_swept_class_s_blob_comes_back_to_be_promoted(promoting, k, blobs: MemoryBlobs):
    store = promoting
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    batch = await _queued(store, k, "BATCH", 3)
    pending = await store.sweep.begin(k, "BATCH:ind", "front", 0, 3, "token", 1)
    assert await store.sweep.commit(pending, [await blobs.write(k, "BATCH:ind", pending.entries)]) == 3
    await _queued(store, k, "ONLINE", 3)
    [online] = await _queued(store, k, "ONLINE")  # the last queued: past the promotion time, so is every BATCH
    await _past_promotion_time(store, k, online)
    item = await _one(store, k)
    assert item.id == batch[0] and item.meta["promoted"] is True
    assert (await store.sweep.queue_sizes(k, "BATCH:ind")).front == 2


async def test_a_select_with_nothing_due_looks_at_no_queue(store, k):
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    await _queued(store, k, "BATCH")
    await _queued(store, k, "ONLINE", 2)
    await _one(store, k)  # the first look: the BATCH head is due only after the promotion time (20 s)
    await store.redis.config_resetstat()
    await _one(store, k)
    stats = await store.redis.info("commandstats")
    assert "cmdstat_evalsha" in stats and not {"cmdstat_lindex", "cmdstat_llen"} & stats.keys()
