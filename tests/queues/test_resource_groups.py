"""Resource groups in the queue store, on real Redis: a select takes no more of a group than its free slots and
takes other work instead; ends free slots, and so does the scheduler's pass for work given back; a place the cap
refused is woken when a slot is freed. Each on one Redis both ways a select settles its groups: in its own call
(select_grouped.lua) and, where a group has a min_in_flight, taken before and settled after (group_take.lua,
group_settle.lua). (The class order for a group under its minimum: test_group_order.py.)"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import RedisCluster

from app.queues.base import AeConfig, GroupCap
from app.queues.codes import ReturnCode
from app.queues.resource_groups import group_by_class
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from app.redis.topology import close_redis, open_redis
from tests.queues.conftest import CONFIG, OTHER_SERVER, SERVER, TOMBSTONE_MS, request
from tests.redis_cluster import LocalCluster
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio

CAPPED = GroupCap("CAPPED", max_in_flight=2, min_in_flight=None)
# With a min_in_flight the class order waits on the group's count: the select takes its slots before and settles
# them after, in calls of their own. (ONLINE is the most important class either way.)
FLOORED = replace(CAPPED, min_in_flight=1)
GROUPED = replace(CONFIG, backlog_limit=100, class_ranks=(1, 3), class_groups=(CAPPED, None))


@pytest.fixture(params=[CAPPED, FLOORED], ids=["in_one_call", "take_select_settle"])
def capped(request) -> GroupCap:
    return request.param


def _grouped(group: GroupCap) -> AeConfig:
    return replace(GROUPED, class_groups=(group, None))


async def _queued(store: QueueStore, k, service_class: str, count: int) -> list[str]:
    return [(await store.insert(k, 1, [request(service_class)], GROUPED.backlog_limit))[0] for _ in range(count)]


async def _in_flight(store: QueueStore) -> int:
    return (await store.groups.figures([CAPPED]))[0].in_flight


async def test_a_select_takes_no_more_than_the_group_s_free_slots_and_other_work_instead(store, k, capped):
    grouped = _grouped(capped)
    online, batch = await _queued(store, k, "ONLINE", 5), await _queued(store, k, "BATCH", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=10, worker_weight=1, overflow=False)
    first = await store.select(k, grouped, SERVER, 10, begin=False)
    assert [item.id for item in first.items] == [*online[:2], *batch]
    assert await _in_flight(store) == 2
    second = await store.select(k, grouped, OTHER_SERVER, 10, begin=False)
    assert second.items == []  # the group is full and nothing else waits
    # An end frees its slot: the next select takes the next of the group's work.
    [ended] = await store.end(k, SERVER, [EndArgs(online[0], "completed")], {"ONLINE": capped})
    assert ended.record["outcome"] == "completed" and await _in_flight(store) == 1
    third = await store.select(k, grouped, OTHER_SERVER, 10, begin=False)
    assert [item.id for item in third.items] == [online[2]] and await _in_flight(store) == 2


async def test_ends_in_the_select_free_their_slots_for_it(store, k, capped):
    grouped = _grouped(capped)
    online = await _queued(store, k, "ONLINE", 4)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, grouped, SERVER, 2, begin=True)
    assert [item.id for item in taken.items] == online[:2]
    again = await store.select(k, grouped, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    assert [result.code for result in again.ended] == [0, 0]
    assert [item.id for item in again.items] == online[2:] and await _in_flight(store) == 2


async def test_work_given_back_keeps_its_slot_until_the_scheduler_s_pass_frees_it(store, k, capped):
    grouped = _grouped(capped)
    await _queued(store, k, "ONLINE", 3)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    held = (await store.select(k, grouped, SERVER, 2, begin=False)).items
    assert len(held) == 2
    reassigned = await store.reassign(k, grouped, server_id=SERVER)  # the server died: its work goes back
    assert reassigned.requeued == 2
    members = await store.groups.held_members(CAPPED.name)
    assert len(members) == 2 and sorted(await store.groups.stale_members(members)) == sorted(members)
    await store.groups.settle_slots(CAPPED, "", 0, (), members)
    assert await _in_flight(store) == 0
    # Taken again, they are other members (another delivery), not stale.
    await store.register_server(k, OTHER_SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    again = (await store.select(k, grouped, OTHER_SERVER, 2, begin=False)).items
    assert {item.meta["deliveries"] for item in again} == {2}
    assert await store.groups.stale_members(await store.groups.held_members(CAPPED.name)) == []


async def test_a_place_the_cap_refused_is_woken_when_a_slot_is_freed(store, k, capped):
    grouped = _grouped(capped)
    online = await _queued(store, k, "ONLINE", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    assert len((await store.select(k, grouped, SERVER, 2, begin=False)).items) == 2

    async def end_one() -> None:
        await store.end(k, SERVER, [EndArgs(online[0], "completed")], {"ONLINE": capped})

    assert (await _wake_after(store, k, grouped, end_one))["data"] == "1"


async def test_a_place_the_cap_refused_is_woken_by_a_select_whose_ends_free_slots(store, k, capped):
    grouped = _grouped(capped)
    online = await _queued(store, k, "ONLINE", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, grouped, SERVER, 2, begin=True)

    async def select_ending_both() -> None:
        # Both ends free their slots and the select takes one of them: one slot is left under the cap.
        again = await store.select(k, grouped, SERVER, 1, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
        assert [item.id for item in again.items] == [online[2]] and await _in_flight(store) == 1

    assert (await _wake_after(store, k, grouped, select_ending_both))["data"] == "2"  # the two ends' slots


async def test_a_select_that_finds_none_of_a_group_s_work_leaves_the_group_alone(store, k):
    """A group at its cap does not list a select that has none of its work to wait for, nor count the time as its
    work's wait on the cap; once such work is queued, a select is refused by the cap and listed."""
    await _queued(store, k, "ONLINE", 2)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    assert len((await store.select(k, GROUPED, SERVER, 2, begin=True)).items) == 2  # the group at its cap
    blocked, capped = store.groups.group_keys(CAPPED.name).blocked, store.groups.group_keys(CAPPED.name).capped
    assert (await store.select(k, GROUPED, OTHER_SERVER, 2, begin=False)).items == []
    assert await store.redis.smembers(blocked) == set() and await store.redis.hget(capped, "since") is None
    await _queued(store, k, "ONLINE", 1)
    assert (await store.select(k, GROUPED, OTHER_SERVER, 2, begin=False)).items == []
    assert await store.redis.smembers(blocked) == {k.notify_channel} and await store.redis.hget(capped, "since") is not None


async def test_a_look_for_starved_work_asks_no_group_of_a_class_without_work(store, k):
    """An environment's first select looks at every class's head for work to promote (starved_class): a group at its
    cap (through another environment's work) is not asked for an empty class either."""
    await _queued(store, k, "ONLINE", 2)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    assert len((await store.select(k, GROUPED, SERVER, 2, begin=True)).items) == 2  # the group at its cap
    other = store.keys("LOCAL", "BILLING")  # its promotion bucket not looked at yet: due
    await store.register_server(other, OTHER_SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    assert (await store.select(other, GROUPED, OTHER_SERVER, 2, begin=False)).items == []
    assert await store.redis.smembers(store.groups.group_keys(CAPPED.name).blocked) == set()


@pytest.mark.parametrize(("queued", "listed"), [(2, False), (3, True)], ids=["none_left", "work_left"])
async def test_a_select_is_listed_only_where_it_left_the_group_s_work_for_lack_of_slots(store, k, capped, queued, listed):
    """A select granted less than it wanted is listed to be woken by a freed slot only where it used every slot it
    was granted and left the group's work queued; one that found no more of it is not."""
    await _queued(store, k, "ONLINE", queued)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    await store.register_server(k, OTHER_SERVER, worker_tasks=3, worker_weight=1, overflow=False)
    assert len((await store.select(k, _grouped(capped), SERVER, 1, begin=False)).items) == 1
    # Asking 3, it is granted the group's last slot and takes one request.
    assert len((await store.select(k, _grouped(capped), OTHER_SERVER, 3, begin=False)).items) == 1
    blocked = await store.redis.smembers(store.groups.group_keys(CAPPED.name).blocked)
    assert blocked == ({k.notify_channel} if listed else set())
    # Only work left waiting counts as waiting on the cap.
    assert (await store.redis.hget(store.groups.group_keys(CAPPED.name).capped, "since") is not None) is listed


async def test_idle_selects_of_one_place_do_not_wake_each_other(store, k, capped):
    """Two long-polling servers of one place, neither with work of the group queued: one refused by the cap while the
    other's reservation holds the slots is not listed, so the give-back wakes neither (each would select again at
    once, overlap again, and again)."""
    grouped, blocked = _grouped(capped), store.groups.group_keys(CAPPED.name).blocked
    await _queued(store, k, "BATCH", 1)  # work of no group: the select takes it, not the group's
    await store.register_server(k, OTHER_SERVER, worker_tasks=3, worker_weight=1, overflow=False)
    async with _heard(store, k.notify_channel) as heard:
        [grant] = await store.groups.take_slots([CAPPED], 3, 30_000)  # the other select's reservation: both slots
        assert grant.granted == 2
        assert len((await store.select(k, grouped, OTHER_SERVER, 3, begin=False)).items) == 1
        assert await store.redis.smembers(blocked) == set()
        assert await store.redis.hget(store.groups.group_keys(CAPPED.name).capped, "since") is None
        await store.groups.settle_all([grant], {}, {})  # it found nothing: both slots given back
        assert await heard() == []
    assert await store.redis.hget(store.groups.group_keys(CAPPED.name).capped, "since") is None


async def test_a_select_refused_for_work_is_woken_by_a_give_back(store, k, capped):
    """Between a take and its settle (the calls of a select on a cluster, or with a min_in_flight) the reservation
    counts: a select refused meanwhile with the group's work queued is listed, and the give-back wakes its place."""
    grouped = _grouped(capped)
    await _queued(store, k, "ONLINE", 1)
    await store.register_server(k, OTHER_SERVER, worker_tasks=3, worker_weight=1, overflow=False)
    async with _heard(store, k.notify_channel) as heard:
        [grant] = await store.groups.take_slots([CAPPED], 3, 30_000)
        assert (await store.select(k, grouped, OTHER_SERVER, 3, begin=False)).items == []
        assert await store.redis.smembers(store.groups.group_keys(CAPPED.name).blocked) == {k.notify_channel}
        await store.groups.settle_all([grant], {}, {})
        assert await heard() == ["2"]


async def test_a_select_refused_for_slots_freed_before_its_settle_is_woken_at_once(store, k, monkeypatch):
    """A select that takes its groups' slots before it and settles after (here: a min_in_flight) may be refused by a
    reservation given back before its settle: no freed slot is left to wake it, so its settle wakes its place."""
    grouped = _grouped(FLOORED)
    await _queued(store, k, "ONLINE", 1)
    await store.register_server(k, OTHER_SERVER, worker_tasks=3, worker_weight=1, overflow=False)
    [grant] = await store.groups.take_slots([CAPPED], 3, 30_000)
    take_slots = store.groups.take_slots

    async def refused_then_given_back(*args: Any) -> Any:
        grants = await take_slots(*args)
        await store.groups.settle_all([grant], {}, {})  # nothing listed yet: nobody to wake
        return grants

    monkeypatch.setattr(store.groups, "take_slots", refused_then_given_back)
    async with _heard(store, k.notify_channel) as heard:
        assert (await store.select(k, grouped, OTHER_SERVER, 3, begin=False)).items == []
        assert await heard() == ["1"]
    assert await store.redis.smembers(store.groups.group_keys(CAPPED.name).blocked) == set()


async def test_a_select_that_drops_lapsed_reservations_wakes_a_place_refused_behind_them(store, k):
    """A reservation whose process died lapses; the next grant drops it, and the select, in its own call, frees its
    slots for the places the cap refused as an end would, though it takes one of them itself."""
    await _queued(store, k, "ONLINE", 1)
    other = store.keys("LOCAL", "BILLING")
    await store.insert(other, 1, [request("ONLINE")], GROUPED.backlog_limit)
    for place in (k, other):
        await store.register_server(place, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    [dead] = await store.groups.take_slots([CAPPED], 2, 30_000)  # a process that dies before its settle
    assert (await store.select(k, GROUPED, SERVER, 2, begin=False)).items == []
    reserved = store.groups.group_keys(CAPPED.name).reserved
    await store.redis.zadd(reserved, {f"{dead.reservation}:2": 0}, xx=True)  # its completion time has passed
    async with _heard(store, k.notify_channel) as heard:
        assert len((await store.select(other, GROUPED, SERVER, 2, begin=False)).items) == 1
        assert await heard() == ["2"]


SENTINEL = "heard-all"


@asynccontextmanager
async def _heard(store: QueueStore, channel: str) -> AsyncIterator[Callable[[], Awaitable[list[str]]]]:
    """Subscribed to `channel`, a function returning what it heard so far: it publishes a sentinel and reads up to
    it (one connection's messages arrive in order), so that hearing nothing needs no wait."""
    pubsub = store.redis.pubsub()
    await pubsub.subscribe(channel)

    async def heard() -> list[str]:
        await store.redis.publish(channel, SENTINEL)
        messages: list[str] = []
        while True:
            message = await eventually(lambda: pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1), what="the sentinel")
            if message["data"] == SENTINEL:
                return messages
            messages.append(message["data"])

    try:
        await eventually(lambda: _subscribed(pubsub), what="the subscription")
        yield heard
    finally:
        await pubsub.aclose()


async def _wake_after(store: QueueStore, k, grouped: AeConfig, act: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    """The wake-up published on the environment's notify channel after `act`, once another server's select found the
    group at its cap (and was listed as refused)."""
    pubsub = store.redis.pubsub()
    await pubsub.subscribe(k.notify_channel)
    try:
        await eventually(lambda: _subscribed(pubsub), what="the subscription")
        assert (await store.select(k, grouped, OTHER_SERVER, 2, begin=False)).items == []
        await act()
        message = await eventually(lambda: pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1), what="a wake-up")
        assert message["channel"] == k.notify_channel
        return message
    finally:
        await pubsub.aclose()


async def _subscribed(pubsub) -> bool:
    message = await pubsub.get_message(timeout=0.1)
    return message is not None and message["type"] == "subscribe"


async def test_the_time_on_the_cap_grows_while_a_select_is_refused(store, k, capped):
    grouped = _grouped(capped)
    await _queued(store, k, "ONLINE", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    await store.select(k, grouped, SERVER, 2, begin=False)
    assert (await store.groups.figures([CAPPED]))[0].capped_ms == 0
    await store.select(k, grouped, OTHER_SERVER, 2, begin=False)
    first = (await store.groups.figures([CAPPED]))[0].capped_ms
    await eventually(lambda: _capped_longer(store, first), what="the time on the cap growing")


async def _capped_longer(store: QueueStore, than: int) -> bool:
    await asyncio.sleep(0)
    return (await store.groups.figures([CAPPED]))[0].capped_ms > than


ROOMY = GroupCap("CAPPED", max_in_flight=4, min_in_flight=None)


def _with(group: GroupCap, completion_time_ms: int = CONFIG.completion_time_ms):
    return replace(GROUPED, class_groups=(group, None), completion_time_ms=completion_time_ms)


def _scripts_called(store: QueueStore, monkeypatch) -> list[str]:
    """The names of the scripts `store` calls from now on, in order."""
    called: list[str] = []
    call = store.scripts.call

    async def spy(script_call, client=None):
        called.append(script_call.script)
        return await call(script_call, client)

    monkeypatch.setattr(store.scripts, "call", spy)
    return called


@pytest.mark.parametrize("floor", [None, 1], ids=["in_one_call", "take_select_settle"])
async def test_concurrent_selects_reach_the_cap_exactly(store, k, floor):
    await _queued(store, k, "ONLINE", 8)
    servers = range(20, 26)
    for server in servers:
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    config = _with(replace(ROOMY, min_in_flight=floor))
    results = await asyncio.gather(*(store.select(k, config, server, 2, begin=True) for server in servers))
    assert sum(len(result.items) for result in results) == ROOMY.max_in_flight
    assert await _in_flight(store) == ROOMY.max_in_flight


@pytest.mark.parametrize(
    ("floor", "calls"),
    [(None, ["select_and_begin_grouped"]), (1, ["group_take", "select_and_begin", "group_settle"])],
    ids=["in_one_call", "take_select_settle"],
)
async def test_a_select_its_groups_grant_in_full_ends_and_settles_in_one_call_or_three(store, k, monkeypatch, floor, calls):
    online = await _queued(store, k, "ONLINE", 4)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    config = _with(replace(ROOMY, min_in_flight=floor))
    taken = await store.select(k, config, SERVER, 2, begin=True)
    called = _scripts_called(store, monkeypatch)
    again = await store.select(k, config, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    assert called == calls  # the ends in the select's script
    assert [result.code for result in again.ended] == [0, 0] and [item.id for item in again.items] == online[2:]
    # The ends' slots were freed with the settle: only what the second select took is held.
    held = await store.groups.held_members(ROOMY.name)
    assert await _in_flight(store) == 2 and sorted(held) == sorted(f"{k.token(i)}|1|1" for i in online[2:])


@pytest.fixture
async def cluster_store(shared_cluster: LocalCluster, blobs) -> AsyncIterator[QueueStore]:
    redis = await open_redis(shared_cluster.masters[0], True, max_connections=20)
    store = QueueStore(redis, f"q{uuid.uuid4().hex[:10]}", idempotency_ttl_s=60, tombstone_ms=TOMBSTONE_MS, samples_ms=60_000, blobs=blobs)
    yield store
    await store.aclose()
    await close_redis(redis)


async def test_on_one_redis_a_select_takes_and_settles_every_group_in_its_own_call(store, monkeypatch):
    await _calls_per_group(store, monkeypatch)


async def test_on_a_cluster_each_group_s_slots_take_a_call_of_their_own(cluster_store, monkeypatch):
    await _calls_per_group(cluster_store, monkeypatch)


async def _calls_per_group(store: QueueStore, monkeypatch) -> None:
    k = store.keys("LOCAL", "PAYROLL")
    single = GroupCap("SINGLE", max_in_flight=1, min_in_flight=None)
    config = replace(GROUPED, class_groups=(ROOMY, single))
    online, batch = await _queued(store, k, "ONLINE", 2), await _queued(store, k, "BATCH", 2)
    await store.register_server(k, SERVER, worker_tasks=10, worker_weight=1, overflow=False)
    called = _scripts_called(store, monkeypatch)
    taken = await store.select(k, config, SERVER, 10, begin=True)
    if isinstance(store.redis, RedisCluster):  # each group's keys in a slot of their own
        assert called == ["group_take"] * 2 + ["select_and_begin"] + ["group_settle"] * 2
    else:
        assert called == ["select_and_begin_grouped"]
    assert [item.id for item in taken.items] == [*online, batch[0]]
    assert [figures.in_flight for figures in await store.groups.figures([ROOMY, single])] == [2, 1]
    called.clear()
    ended = await store.end(k, SERVER, [EndArgs(item.id, "completed") for item in taken.items], group_by_class(config))
    assert [result.code for result in ended] == [0, 0, 0]
    assert called == (["end", "group_settle", "group_settle"] if isinstance(store.redis, RedisCluster) else ["end_grouped"])
    assert [figures.in_flight for figures in await store.groups.figures([ROOMY, single])] == [0, 0]


async def test_a_select_refused_frees_the_slots_of_its_ends_in_its_own_call(store, k, monkeypatch):
    """The ends apply whatever the select's answer (here: the server is surplus): their slots are freed with them."""
    online = await _queued(store, k, "ONLINE", 3)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, GROUPED, SERVER, 2, begin=True)
    assert await _in_flight(store) == 2
    await store.environments.retire_servers(k, [SERVER])
    called = _scripts_called(store, monkeypatch)
    result = await store.select(k, GROUPED, SERVER, 2, begin=True, ends=[EndArgs(taken.items[0].id, "completed")])
    assert result.status is ReturnCode.SERVER_SURPLUS and [end.code for end in result.ended] == [ReturnCode.OK]
    assert called == ["select_and_begin_grouped"]
    assert await store.groups.held_members(CAPPED.name) == [f"{k.token(online[1])}|1|1"]


async def test_a_group_short_of_the_select_s_ask_ends_first_so_its_ends_free_slots_for_it(store, k, monkeypatch):
    """Taken before the select (a group with a min_in_flight), a group's slots do not yet count the select's ends."""
    floored = _grouped(FLOORED)
    online = await _queued(store, k, "ONLINE", 4)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, floored, SERVER, 2, begin=True)  # the group's cap, 2, reached
    called = _scripts_called(store, monkeypatch)
    again = await store.select(k, floored, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    assert called == ["group_take", "end", "group_settle", "group_take", "select_and_begin", "group_settle"]
    assert [result.code for result in again.ended] == [0, 0]
    assert [item.id for item in again.items] == online[2:] and await _in_flight(store) == 2


async def test_after_a_group_came_short_a_select_carrying_ends_ends_first(store, k, monkeypatch):
    floored = _grouped(FLOORED)
    online = await _queued(store, k, "ONLINE", 6)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, floored, SERVER, 2, begin=True)
    assert (await store.select(k, floored, OTHER_SERVER, 2, begin=True)).items == []  # the take came short
    called = _scripts_called(store, monkeypatch)
    again = await store.select(k, floored, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    assert called == ["end_grouped", "group_take", "select_and_begin", "group_settle"]  # no take wasted
    assert [item.id for item in again.items] == online[2:4] and await _in_flight(store) == 2


async def test_a_crash_between_take_and_settle_counts_no_slot_twice_once_reconciled(store, k, monkeypatch):
    """The select runs (its ends applied, its work taken) and its process dies before the settle: the ends' slots
    stay held and the work taken is counted by the reservation only (over the truth, never under), until the
    scheduler's pass frees the ended and holds the taken; when the reservation lapses, the count is the truth. (A
    group with a min_in_flight: in one call, a select and its groups' slots change together or not at all.)"""
    config = _with(replace(ROOMY, min_in_flight=1), completion_time_ms=1_000)  # reservations lapse a completion time after
    online = await _queued(store, k, "ONLINE", 6)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, config, SERVER, 2, begin=True)

    async def crash(*_args: object) -> None:
        raise ConnectionError("the process died")

    monkeypatch.setattr(store.groups, "settle_all", crash)
    with pytest.raises(ConnectionError):
        await store.select(k, config, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    monkeypatch.undo()
    assert await _in_flight(store) == 4  # 2 ended but held, 2 in flight on the reservation: nothing more fits
    assert (await store.select(k, config, OTHER_SERVER, 2, begin=True)).items == []
    # The scheduler's pass (app/scheduler/duties/groups.py): the ended members freed, the taken ones held.
    stale = await store.groups.stale_members(await store.groups.held_members(ROOMY.name))
    unheld = await store.groups.unheld_members(k, {"ONLINE": ROOMY})
    assert sorted(stale) == sorted(f"{k.token(i)}|1|1" for i in online[:2])
    assert list(unheld) == [ROOMY] and sorted(unheld[ROOMY]) == sorted(f"{k.token(i)}|1|1" for i in online[2:4])
    await store.groups.settle_slots(ROOMY, "", 0, unheld[ROOMY], stale)
    assert await _in_flight(store) == 4  # the reservation too, until it lapses: over the truth, not under
    await eventually(lambda: _in_flight_is(store, 2), what="the lost select's reservation lapsing")
    assert await store.groups.unheld_members(k, {"ONLINE": ROOMY}) == {}
    assert [item.id for item in (await store.select(k, config, OTHER_SERVER, 2, begin=True)).items] == online[4:]
    assert await _in_flight(store) == 4


async def _in_flight_is(store: QueueStore, count: int) -> bool:
    return await _in_flight(store) == count


async def test_the_pass_reads_a_held_member_once_it_is_old_and_again_only_as_old_again(store, k):
    """The scheduler's pass asks for the members held before a time (app/scheduler/duties/groups.py): work held
    since then is not read; one found still in flight is stamped, and one freed meanwhile stays freed."""
    await _queued(store, k, "ONLINE", 2)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    before_select = await store.clock_ms()
    taken = (await store.select(k, GROUPED, SERVER, 2, begin=True)).items
    members = sorted(f"{k.token(item.id)}|1|1" for item in taken)
    assert await store.groups.held_members(CAPPED.name, before_select - 1) == []
    now_ms = await store.clock_ms()
    assert sorted(await store.groups.held_members(CAPPED.name, now_ms)) == members
    await store.end(k, SERVER, [EndArgs(taken[0].id, "completed")], {"ONLINE": CAPPED})
    await store.groups.found_in_flight(CAPPED.name, members, now_ms + 5_000)
    assert await store.groups.held_members(CAPPED.name, now_ms + 4_999) == []
    assert await store.groups.held_members(CAPPED.name, now_ms + 5_000) == [f"{k.token(taken[1].id)}|1|1"]
    assert await _in_flight(store) == 1
