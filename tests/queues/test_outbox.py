"""What ended requests leave behind, through the queue store on a real Redis: the outbox of work records, exit
calls, tombstones and samples."""

from __future__ import annotations

import json

from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both


async def ended(store: QueueStore, k: AeKeys, count: int, *, exit_url: str = "") -> list[str]:
    """`count` requests deleted by their queue manager (its exit is called for each when it has one)."""
    requests = [request() for _ in range(count)]
    for r in requests:
        r.meta["exit"] = exit_url
    ids = await store.insert(k, QUEUE_MANAGER, requests, CONFIG.backlog_limit)
    for request_id in ids:
        await store.delete(k, request_id, QUEUE_MANAGER)
    return ids


async def test_records_are_read_with_their_position_and_dropped_once_acknowledged(store, k):
    assert await store.outbox.pending_records(k, 10) == ("", 0, [])
    ids = await ended(store, k, 3)
    incarnation, first, records = await store.outbox.pending_records(k, 2)
    assert incarnation and first == 0 and [json.loads(r)["id"] for r in records] == ids[:2]
    assert await store.outbox.ack_records(k, records) == 2
    assert await store.outbox.ack_records(k, records) == 0  # another flusher acknowledged them first
    again, first, records = await store.outbox.pending_records(k, 10)
    assert again == incarnation and first == 2 and [json.loads(r)["id"] for r in records] == ids[2:]


async def test_exits_are_claimed_once_due_and_settled(store, k):
    await ended(store, k, 2, exit_url="http://qm.example/exit")
    claimed = await store.outbox.claim_exits(k, claim_ms=60_000, limit=10)
    assert len(claimed) == 2 and await store.outbox.claim_exits(k, claim_ms=60_000, limit=10) == []
    await store.outbox.settle_exit(k, claimed[0], None, 0)
    await store.outbox.settle_exit(k, claimed[1], "the next attempt", 60_000)
    assert await store.redis.zrange(k.exits, 0, -1) == ["the next attempt"]


async def test_ends_are_samples_for_goal_evaluation(store, k):
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    await store.end(k, SERVER, [EndArgs(item.id, "completed", None)])
    (sample,) = await store.outbox.samples(k, 0)
    assert sample.service_class == "ONLINE" and sample.response_ms == sample.queue_ms + sample.execution_ms
