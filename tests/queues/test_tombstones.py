"""Tombstones (lua/includes/tombstones.lua) through the queue store on a real Redis: a late end hears "already ended"
for as long as the stated bound, the buckets then expire whole, an earlier life's end is refused, and tombstones
written in the form before buckets are honoured."""

from __future__ import annotations

import base64
import dataclasses
import secrets
import uuid
from collections.abc import AsyncIterator

import pytest

from app.errors import Conflict
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.tombstones import tombstone_field
from app.queues.transitions import EndArgs, EndResult
from app.redis.topology import close_redis, is_cluster, open_redis
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request, tombstone_of
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both
from tests.waiting import eventually

SHORT_BOUND_MS = 1_500


@pytest.fixture
async def short(redis_url: str) -> AsyncIterator[QueueStore]:
    """A store whose tombstones are kept SHORT_BOUND_MS."""
    redis = await open_redis(redis_url, await is_cluster(redis_url), max_connections=10)
    store = QueueStore(redis, f"t{uuid.uuid4().hex[:10]}", idempotency_ttl_s=60, tombstone_ms=SHORT_BOUND_MS, samples_ms=60_000)
    yield store
    await store.aclose()
    await close_redis(redis)


async def held(store: QueueStore, k: AeKeys, request_id: str | None = None) -> str:
    """A request selected by SERVER; its id, as inserts make them (app/work/insert.py) unless given."""
    new = dataclasses.replace(request(), id=request_id or secrets.token_urlsafe(12))
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    (queued,) = await store.insert(k, QUEUE_MANAGER, [new], CONFIG.backlog_limit)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    assert item.id == queued
    return queued


async def redis_ms(store: QueueStore, k: AeKeys) -> int:
    return await store.clock_ms(near=k.req)


async def test_a_late_end_just_inside_the_bound_hears_already_ended_and_the_bucket_then_goes(short):
    k = short.keys("LOCAL", "PAYROLL")
    request_id = await held(short, k)
    (ended,) = await short.end(k, SERVER, [EndArgs(request_id, "completed")])
    assert ended.code is ReturnCode.OK
    ended_ms = ended.record["ended"]

    async def just_inside() -> bool:
        return await redis_ms(short, k) >= ended_ms + SHORT_BOUND_MS - 100

    await eventually(just_inside, 10, what="the bound nearly over", interval=0.01)
    assert await short.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.ALREADY_ENDED, "completed")]

    # Then the bucket expires whole: no duty forgets tombstones one by one.
    async def gone() -> bool:
        return not any([await short.redis.exists(key) for key in k.tombstones])

    await eventually(gone, 10, what="the tombstones' bucket expired")
    assert await short.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.UNKNOWN_WORK, "")]


@pytest.mark.parametrize("request_id", ["AZaz09-_Mn4yQ5_-", None], ids=["every-range", "random"])
async def test_a_tombstone_is_a_binary_id_and_a_letter_in_its_bucket(store, k, request_id):
    request_id = await held(store, k, request_id)
    await store.end(k, SERVER, [EndArgs(request_id, "failed")])
    (bucket,) = [key for key in k.tombstones if await store.redis.exists(key)]
    raw = await store.redis.execute_command("HGETALL", bucket, NEVER_DECODE=True)
    assert raw == {base64.urlsafe_b64decode(request_id): f"f{QUEUE_MANAGER}".encode()}
    assert await tombstone_of(store, k, request_id) == f"failed|{QUEUE_MANAGER}"
    assert not await store.redis.exists(k.done) and not await store.redis.exists(k.done_exp)


# Ids of every form tombstone_field tells apart: as inserts make them, and each way of not being one (a character
# outside the URL-safe alphabet, padding, too short or long, not ASCII, under 12 bytes).
FIELD_FORMS = ["AZaz09-_Mn4yQ5_-", "AAAAAAAAAAAAAA==", "AAAAAAAAAAAA+/AA", "AAAAAAAAAAAAAA.A", "0123456789abcde", "ééééééé_", "short"]


@pytest.mark.parametrize("request_id", FIELD_FORMS)
async def test_the_field_the_service_sends_is_the_one_redis_looks_up(store, k, request_id):
    """An end writes the field the service computed (app/queues/tombstones.py); a status read and a late end find it
    by the field Redis computes (lua/includes/tombstones.lua): the two must agree for every form of id."""
    await held(store, k, request_id)
    await store.end(k, SERVER, [EndArgs(request_id, "completed")])
    (bucket,) = [key for key in k.tombstones if await store.redis.exists(key)]
    assert await store.redis.execute_command("HKEYS", bucket, NEVER_DECODE=True) == [tombstone_field(request_id)]
    assert await tombstone_of(store, k, request_id) == f"completed|{QUEUE_MANAGER}"
    assert await store.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.ALREADY_ENDED, "completed")]


async def test_an_earlier_lifes_end_never_ends_the_current_one(store, k):
    request_id = await held(store, k)
    (died,) = await store.end(k, SERVER, [EndArgs(request_id, "failed", dead_letter=True)])
    assert died.code is ReturnCode.OK
    await store.dead_letters.retry(k, request_id, "back")
    assert await tombstone_of(store, k, request_id) is None  # it lives again: its tombstone went
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items  # the same server takes its second life
    assert item.id == request_id and item.meta.life == 2

    # The first life's late begin and end, from that server, are told that life ended; the second is untouched.
    with pytest.raises(Conflict) as refused:
        await store.begin(k, CONFIG, request_id, SERVER, life=1)
    assert refused.value.code == "already_ended"
    assert await store.end(k, SERVER, [EndArgs(request_id, "completed", life=1)]) == [EndResult(ReturnCode.ALREADY_ENDED, "")]
    assert (await store.redis.hget(k.req, request_id)) is not None
    (ended,) = await store.end(k, SERVER, [EndArgs(request_id, "completed", life=2)])
    assert ended.code is ReturnCode.OK and ended.record["life"] == 2
    assert await tombstone_of(store, k, request_id) == f"completed|{QUEUE_MANAGER}"


async def test_a_tombstone_written_in_the_earlier_form_still_answers(store, k):
    """As the version before buckets wrote it: `<outcome>|<queue manager>` in k.done, its expiry in k.done_exp."""
    request_id = secrets.token_urlsafe(12)
    now = await redis_ms(store, k)
    await store.redis.hset(k.done, request_id, f"completed|{QUEUE_MANAGER}")
    await store.redis.zadd(k.done_exp, {request_id: now + 3_600_000})

    assert await store.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.ALREADY_ENDED, "completed")]
    assert await tombstone_of(store, k, request_id) == f"completed|{QUEUE_MANAGER}"
    with pytest.raises(Conflict) as refused:
        await store.delete(k, request_id, QUEUE_MANAGER)
    assert refused.value.code == "already_ended"

    # The lease duty forgets it once its hour has passed, as before.
    await store.redis.zadd(k.done_exp, {request_id: 0})
    await store.outbox.forget_tombstones(k)
    assert await store.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.UNKNOWN_WORK, "")]
