"""Dead letters in the queue store: written by the script that ends a request, kept for the store's time, retried
at the front or back of their queue (a swept queue's back is its rear), and read in the order they died."""

from __future__ import annotations

import pytest

from app.errors import NotFound
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from tests.queues.conftest import CONFIG, SERVER, request
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio


async def _dead(store: QueueStore, k, count: int) -> list[str]:
    """`count` requests queued, selected and ended failed into the dead letters, one at a time; their ids."""
    await store.register_server(k, SERVER, worker_tasks=count, worker_weight=1, overflow=False)
    ids = []
    for _ in range(count):
        [request_id] = await store.insert(k, 1, [request()], CONFIG.backlog_limit)
        [item] = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items
        [ended] = await store.end(k, SERVER, [EndArgs(item.id, "failed", None, "broken", dead_letter=True)])
        assert ended.record["outcome"] == "failed"
        ids.append(request_id)
    return ids


async def test_a_dead_letter_older_than_its_keep_time_goes_when_the_next_comes(store, k):
    store.dead_letter_ms = 1
    [first] = await _dead(store, k, 1)
    died = (await store.dead_letters.get(k, first)).died_ms
    await eventually(lambda: _past(store, died + 1), what="Redis's clock past the keep time")
    [second] = await _dead(store, k, 1)
    assert await store.dead_letters.get(k, first) is None
    assert (await store.dead_letters.get(k, second)).meta["error"] == "broken"


async def _past(store: QueueStore, ms: int) -> bool:
    return await store.clock_ms() > ms


async def test_pages_follow_the_order_they_died_without_repeats(store, k):
    ids = await _dead(store, k, 5)
    # Died in the same millisecond (Redis's clock), letters come in the order of their ids.
    died = {i: (await store.dead_letters.get(k, i)).died_ms for i in ids}
    ids.sort(key=lambda i: (died[i], i))
    seen, after = [], None
    while True:
        page = await store.dead_letters.page(k, after, None, 2)
        seen += [letter.id for letter in page.letters]
        if page.last is None:
            break
        after = page.last
    assert seen == ids


async def test_a_retry_to_the_back_of_a_swept_queue_joins_its_rear(store, k, blobs):
    [dead] = await _dead(store, k, 1)
    queued = [(await store.insert(k, 1, [request()], CONFIG.backlog_limit))[0] for _ in range(3)]
    pending = await store.sweep.begin(k, "ONLINE:ind", "front", 1, 2, "token", 1)
    assert await store.sweep.commit(pending, [await blobs.write(k, "ONLINE:ind", pending.entries)]) == 2
    meta = await store.dead_letters.retry(k, dead, "back")
    assert meta["life"] == 2 and meta["deliveries"] == 0 and meta["state"] == "q"
    assert await store.redis.lrange(k.rear("ONLINE:ind"), 0, -1) == [dead]
    with pytest.raises(NotFound):
        await store.dead_letters.retry(k, dead, "back")
    # Taken last: after the front's request and the two brought back from the database.
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    taken = [item.id for item in (await store.select(k, CONFIG, SERVER, 10, begin=False)).items]
    while len(taken) < 4:
        taken += [item.id for item in (await store.select(k, CONFIG, SERVER, 10, begin=False)).items]
    assert sorted(taken[:3]) == sorted(queued) and taken[3] == dead
