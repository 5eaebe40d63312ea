"""The advisories' stream on a real Redis: appended to, read after a position, and positioned before the last few."""

from __future__ import annotations

from app.events.advisories import Advisories, AdvisoryReader
from app.redis.context import RedisContext
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both


async def test_advisories_read_back_in_order_after_a_position(redis_context: RedisContext) -> None:
    store = Advisories(redis_context)
    reader = AdvisoryReader(redis_context.redis, redis_context.prefix)
    assert await store.position_before(2) == "0-0"
    ids = [await store.append(f"WLM.INFO.TEST.{n}", f'{{"n": {n}}}') for n in range(3)]
    read = await reader.read_after("0-0", 10, block_ms=100)
    assert [(a.id, a.subject, a.data) for a in read] == [(ids[n], f"WLM.INFO.TEST.{n}", f'{{"n": {n}}}') for n in range(3)]
    assert [a.id for a in await reader.read_after(ids[0], 1, block_ms=100)] == [ids[1]]
    assert await store.position_before(2) == ids[0]  # the last two come after it
    assert await store.position_before(0) == ids[2]
    assert await reader.read_after(ids[2], 10, block_ms=50) == []  # none came while it waited
