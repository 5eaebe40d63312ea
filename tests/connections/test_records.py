"""Connections' records on a real Redis: an active connection's record, and departed queue managers."""

from __future__ import annotations

from app.connections.records import ConnectionRecords
from app.redis.context import RedisContext

QUEUE_MANAGER = 1
QM_RECORD = {"id": QUEUE_MANAGER, "role": "queue_manager", "node": None}


async def test_a_departed_queue_manager_is_due_only_once_its_time_has_come(redis_context: RedisContext) -> None:
    store = ConnectionRecords(redis_context)
    await store.note_departed(QM_RECORD, purge_again_after_ms=60_000)
    assert await store.departed_due() == []
    await store.note_departed({**QM_RECORD, "id": 2}, purge_again_after_ms=0)
    (due,) = await store.departed_due()
    assert due.record == {**QM_RECORD, "id": 2}
    await store.forget_departed(due)
    assert await store.departed_due() == []
    assert await redis_context.redis.zcard(f"{redis_context.prefix}:departed") == 1  # the other one still waits for its time


async def test_a_connection_record_reads_back_until_forgotten(redis_context: RedisContext) -> None:
    store = ConnectionRecords(redis_context)
    assert await store.get("abc") is None
    await store.save("abc", QM_RECORD)
    assert await store.get("abc") == QM_RECORD
    await store.forget("abc")
    assert await store.get("abc") is None
