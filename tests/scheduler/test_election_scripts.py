"""The scheduler election's scripts, called through its records on a real Redis: who holds the role, the epoch that fences a
deposed holder, and resigning."""

from __future__ import annotations

import json

from app.redis.context import RedisContext
from app.scheduler.election import SchedulerElection
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both

ACTIVATION_MS = 60_000
INFO = json.dumps({"host": "h", "pid": 1})


async def test_the_first_member_takes_the_role_and_keeps_it_under_one_epoch(redis_context: RedisContext) -> None:
    store = SchedulerElection(redis_context)
    took = await store.elect("a", 50, ACTIVATION_MS, INFO)
    assert (took.active, took.epoch, took.holder, took.outcome) == (True, 1, "a", "took")
    waiting = await store.elect("b", 50, ACTIVATION_MS, INFO)
    assert (waiting.active, waiting.epoch, waiting.holder, waiting.outcome) == (False, 1, "a", "standby")
    kept = await store.elect("a", 50, ACTIVATION_MS, INFO)
    assert (kept.active, kept.epoch, kept.outcome) == (True, 1, "kept")


async def test_a_heavier_member_takes_over_with_the_next_epoch(redis_context: RedisContext) -> None:
    store = SchedulerElection(redis_context)
    await store.elect("light", 10, ACTIVATION_MS, INFO)
    assert (await store.elect("heavy", 90, ACTIVATION_MS, INFO)).outcome == "standby"  # the holder hands over first
    yielded = await store.elect("light", 10, ACTIVATION_MS, INFO)
    assert (yielded.active, yielded.holder, yielded.outcome) == (False, None, "yielded")
    took = await store.elect("heavy", 90, ACTIVATION_MS, INFO)
    assert (took.active, took.epoch, took.outcome) == (True, 2, "took")


async def test_a_silent_holder_is_replaced_and_fenced_by_the_new_epoch(redis_context: RedisContext) -> None:
    store = SchedulerElection(redis_context)
    await store.elect("a", 50, ACTIVATION_MS, INFO)
    await store.elect("b", 50, ACTIVATION_MS, INFO)
    # The holder fell silent longer than the activation interval (its last renewal moved back in time).
    members_key, holder_key = f"{{{redis_context.prefix}:scheduler}}:members", f"{{{redis_context.prefix}:scheduler}}:holder"
    long_ago = await redis_context.clock_ms() - 2 * ACTIVATION_MS
    await redis_context.redis.hset(holder_key, "renewed", long_ago)
    seen = json.loads(await redis_context.redis.hget(members_key, "a"))
    await redis_context.redis.hset(members_key, "a", json.dumps({**seen, "seen": long_ago}))
    took = await store.elect("b", 50, ACTIVATION_MS, INFO)
    assert (took.active, took.epoch, took.holder, took.outcome) == (True, 2, "b", "took")
    deposed = await store.elect("a", 50, ACTIVATION_MS, INFO)
    assert (deposed.active, deposed.epoch, deposed.holder) == (False, 2, "b")


async def test_resigning_gives_the_role_up_at_once_and_keeps_the_epoch(redis_context: RedisContext) -> None:
    store = SchedulerElection(redis_context)
    await store.elect("a", 50, ACTIVATION_MS, INFO)
    await store.elect("b", 50, ACTIVATION_MS, INFO)
    standby = await store.resign("b")
    assert (standby.active, standby.epoch, standby.holder, standby.outcome) == (False, 1, "a", "standby")
    resigned = await store.resign("a")
    assert (resigned.active, resigned.epoch, resigned.holder, resigned.outcome) == (False, 1, None, "resigned")
    holder, members = await store.status()
    assert "member" not in holder and holder["epoch"] == "1" and members == []
    took = await store.elect("b", 50, ACTIVATION_MS, INFO)
    assert (took.epoch, took.outcome) == (2, "took")


async def test_the_status_lists_members_with_their_age_by_redis_clock(redis_context: RedisContext) -> None:
    store = SchedulerElection(redis_context)
    assert await store.status() == ({}, [])
    await store.elect("a", 50, ACTIVATION_MS, INFO)
    holder, (member,) = await store.status()
    assert holder["member"] == "a" and holder["epoch"] == "1"
    assert (member.member, member.weight, member.info) == ("a", 50, {"host": "h", "pid": 1}) and 0 <= member.seen_ms_ago < 1000
