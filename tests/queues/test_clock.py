"""One clock: every instant a script writes (inserted, selected, begun, ended, leases, heartbeats, tombstones) is
Redis's, whatever the calling process's clock says. Each test runs the scripts through the queue store with this
process's clock set 5 s (or a minute) off and checks each instant against Redis's TIME read before and after."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from app.queues.base import AeConfig
from app.queues.keys import TOMBSTONE_BUCKETS, AeKeys
from app.queues.request_meta import RequestMeta
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, NewRequest
from tests.queues.conftest import tombstone_of

CONFIG = AeConfig(class_order=("ONLINE", "BATCH"), completion_time_ms=30_000, backlog_limit=100, max_deliveries=3)
TOMBSTONE_MS = 60_000
SERVER = 7


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[QueueStore]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = QueueStore(redis, f"clock{uuid.uuid4().hex[:8]}", idempotency_ttl_s=60, tombstone_ms=TOMBSTONE_MS, samples_ms=60_000)
    yield store
    await store.aclose()
    await redis.aclose()


@pytest.fixture
def set_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Sets this process's wall clock `offset` seconds off (as on a replica whose host clock is wrong)."""
    real = time.time

    def offset_by(offset: float) -> None:
        monkeypatch.setattr(time, "time", lambda: real() + offset)
        monkeypatch.setattr(time, "time_ns", lambda: int((real() + offset) * 1e9))

    return offset_by


def request(service_class: str = "ONLINE") -> NewRequest:
    meta = {"sc": service_class, "qm": 1, "state": "q", "deliveries": 0, "exit": ""}
    return NewRequest(uuid.uuid4().hex, service_class, False, RequestMeta(meta), '{"n": 1}', None)


async def redis_now(store: QueueStore) -> int:
    seconds, micros = await store.redis.time()
    return seconds * 1000 + micros // 1000


async def meta_of(store: QueueStore, k: AeKeys, request_id: str) -> dict:
    return json.loads(await store.redis.hget(k.req, request_id))


async def test_a_requests_life_is_stamped_by_redis_whatever_the_callers_clock(store, set_clock):
    k = store.keys("LOCAL", "PAYROLL")
    set_clock(+5)
    before = await redis_now(store)
    (request_id,) = await store.insert(k, 1, [request()], CONFIG.backlog_limit)
    after = await redis_now(store)
    assert before <= (await meta_of(store, k, request_id))["inserted"] <= after

    set_clock(-5)  # the select comes from a replica whose clock is 10 s behind the insert's
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    before = await redis_now(store)
    result = await store.select(k, CONFIG, SERVER, 1, begin=False)
    after = await redis_now(store)
    (item,) = result.items
    selected = item.meta["selected"]
    assert before <= selected <= after and selected >= item.meta["inserted"]
    assert await store.redis.zscore(k.leases, request_id) == selected + CONFIG.completion_time_ms
    assert before <= int(await store.redis.hget(k.seen, str(SERVER))) <= after

    set_clock(+5)
    before = await redis_now(store)
    lease_ends = await store.begin(k, CONFIG, request_id, SERVER)
    after = await redis_now(store)
    assert before + CONFIG.completion_time_ms <= lease_ends <= after + CONFIG.completion_time_ms
    assert await store.redis.zscore(k.leases, request_id) == lease_ends
    begun = (await meta_of(store, k, request_id))["begun"]
    assert before <= begun <= after

    set_clock(-5)
    before = await redis_now(store)
    assert await store.extend(k, CONFIG, SERVER) == 1  # the server's heartbeat
    after = await redis_now(store)
    assert before <= int(await store.redis.hget(k.seen, str(SERVER))) <= after
    assert before + CONFIG.completion_time_ms <= await store.redis.zscore(k.leases, request_id) <= after + CONFIG.completion_time_ms

    set_clock(+5)
    before = await redis_now(store)
    (ended,) = await store.end(k, SERVER, [EndArgs(request_id, "completed", None)])
    after = await redis_now(store)
    record = ended.record
    assert before <= record["ended"] <= after
    assert record["inserted"] <= record["selected"] <= record["begun"] <= record["ended"]
    # Its tombstone's bucket expires whole, at least TOMBSTONE_MS after the end and at most a bucket's width later.
    (bucket,) = [key for key in k.tombstones if await store.redis.exists(key)]
    width = TOMBSTONE_MS // (TOMBSTONE_BUCKETS - 1) + 1
    assert before + TOMBSTONE_MS <= await store.redis.pexpiretime(bucket) <= after + TOMBSTONE_MS + width
    (sample,) = await store.outbox.samples(k, 0)
    assert sample.queue_ms == record["selected"] - record["inserted"] >= 0
    assert sample.execution_ms == record["ended"] - record["selected"] >= 0
    assert sample.response_ms == sample.queue_ms + sample.execution_ms


async def test_a_caller_whose_clock_runs_ahead_neither_expires_leases_nor_takes_servers_for_dead(store, set_clock):
    k = store.keys("LOCAL", "PAYROLL")
    await store.insert(k, 1, [request()], CONFIG.backlog_limit)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items

    set_clock(+60)  # the scheduler's host is a minute ahead: by its clock the 30 s lease and heartbeat are long past
    assert await store.environments.silent_servers(k, 30_000) == []
    reassigned = await store.reassign(k, CONFIG)
    assert (reassigned.requeued, reassigned.abandoned) == (0, [])
    assert (await meta_of(store, k, item.id))["state"] == "b"

    await store.outbox.forget_tombstones(k)
    (ended,) = await store.end(k, SERVER, [EndArgs(item.id, "completed", None)])
    assert ended.code == 0
    await store.outbox.forget_tombstones(k)
    assert await tombstone_of(store, k, item.id) == "completed|1"  # kept, by Redis's clock


async def test_exit_retries_and_the_sweepers_interval_follow_redis_clock(store, set_clock):
    k = store.keys("LOCAL", "PAYROLL")
    set_clock(-3600)  # an hour behind: a retry due "in 1 s" by this clock would be due at once
    await store.redis.zadd(k.exits, {"first": 0})
    before = await redis_now(store)
    await store.outbox.settle_exit(k, "first", "second", 60_000)
    after = await redis_now(store)
    assert await store.outbox.claim_exits(k, 60_000, 10) == []  # due in a minute by Redis's clock: not yet
    assert before + 60_000 <= await store.redis.zscore(k.exits, "second") <= after + 60_000

    elapsed, _ = await store.sweep.take_service_rates(k)
    assert elapsed is None  # counting begins now
    await store.insert(k, 1, [request(), request()], CONFIG.backlog_limit)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    await store.select(k, CONFIG, SERVER, 2, begin=False)
    set_clock(+3600)
    elapsed, served = await store.sweep.take_service_rates(k)
    assert served == {"ONLINE:ind": 2}
    assert 0 <= elapsed < 3_600_000  # measured between Redis's instants, not across the two clocks
