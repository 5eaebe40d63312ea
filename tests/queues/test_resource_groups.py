"""Resource groups in the queue store, on real Redis: a select takes no more of a group than its free slots and
takes other work instead; ends free slots, and so does the scheduler's pass for work given back; a place the cap
refused is woken when a slot is freed. (The class order for a group under its minimum: test_group_order.py.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from app.queues.base import GroupCap
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from tests.queues.conftest import CONFIG, OTHER_SERVER, SERVER, request
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio

CAPPED = GroupCap("CAPPED", max_in_flight=2, min_in_flight=None)
GROUPED = replace(CONFIG, backlog_limit=100, class_ranks=(1, 3), class_groups=(CAPPED, None))


async def _queued(store: QueueStore, k, service_class: str, count: int) -> list[str]:
    return [(await store.insert(k, 1, [request(service_class)], GROUPED.backlog_limit))[0] for _ in range(count)]


async def _in_flight(store: QueueStore) -> int:
    return (await store.groups.figures([CAPPED]))[0].in_flight


async def test_a_select_takes_no_more_than_the_group_s_free_slots_and_other_work_instead(store, k):
    online, batch = await _queued(store, k, "ONLINE", 5), await _queued(store, k, "BATCH", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=10, worker_weight=1, overflow=False)
    first = await store.select(k, GROUPED, SERVER, 10, begin=False)
    assert [item.id for item in first.items] == [*online[:2], *batch]
    assert await _in_flight(store) == 2
    second = await store.select(k, GROUPED, OTHER_SERVER, 10, begin=False)
    assert second.items == []  # the group is full and nothing else waits
    # An end frees its slot: the next select takes the next of the group's work.
    [ended] = await store.end(k, SERVER, [EndArgs(online[0], "completed")], {"ONLINE": CAPPED})
    assert ended.record["outcome"] == "completed" and await _in_flight(store) == 1
    third = await store.select(k, GROUPED, OTHER_SERVER, 10, begin=False)
    assert [item.id for item in third.items] == [online[2]] and await _in_flight(store) == 2


async def test_ends_in_the_select_free_their_slots_for_it(store, k):
    online = await _queued(store, k, "ONLINE", 4)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    taken = await store.select(k, GROUPED, SERVER, 2, begin=True)
    assert [item.id for item in taken.items] == online[:2]
    again = await store.select(k, GROUPED, SERVER, 2, begin=True, ends=[EndArgs(item.id, "completed") for item in taken.items])
    assert [result.code for result in again.ended] == [0, 0]
    assert [item.id for item in again.items] == online[2:] and await _in_flight(store) == 2


async def test_work_given_back_keeps_its_slot_until_the_scheduler_s_pass_frees_it(store, k):
    await _queued(store, k, "ONLINE", 3)
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    held = (await store.select(k, GROUPED, SERVER, 2, begin=False)).items
    assert len(held) == 2
    reassigned = await store.reassign(k, GROUPED, server_id=SERVER)  # the server died: its work goes back
    assert reassigned.requeued == 2
    members = await store.groups.held_members(CAPPED.name)
    assert len(members) == 2 and sorted(await store.groups.stale_members(members)) == sorted(members)
    await store.groups.settle_slots(CAPPED, "", 0, (), members)
    assert await _in_flight(store) == 0
    # Taken again, they are other members (another delivery), not stale.
    await store.register_server(k, OTHER_SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    again = (await store.select(k, GROUPED, OTHER_SERVER, 2, begin=False)).items
    assert {item.meta["deliveries"] for item in again} == {2}
    assert await store.groups.stale_members(await store.groups.held_members(CAPPED.name)) == []


async def test_a_place_the_cap_refused_is_woken_when_a_slot_is_freed(store, k):
    online = await _queued(store, k, "ONLINE", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    assert len((await store.select(k, GROUPED, SERVER, 2, begin=False)).items) == 2
    pubsub = store.redis.pubsub()
    await pubsub.subscribe(k.notify_channel)
    try:
        await eventually(lambda: _subscribed(pubsub), what="the subscription")
        assert (await store.select(k, GROUPED, OTHER_SERVER, 2, begin=False)).items == []
        await store.end(k, SERVER, [EndArgs(online[0], "completed")], {"ONLINE": CAPPED})
        message = await eventually(lambda: pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1), what="a wake-up")
        assert message["channel"] == k.notify_channel and message["data"] == "1"
    finally:
        await pubsub.aclose()


async def _subscribed(pubsub) -> bool:
    message = await pubsub.get_message(timeout=0.1)
    return message is not None and message["type"] == "subscribe"


async def test_the_time_on_the_cap_grows_while_a_select_is_refused(store, k):
    await _queued(store, k, "ONLINE", 3)
    for server in (SERVER, OTHER_SERVER):
        await store.register_server(k, server, worker_tasks=2, worker_weight=1, overflow=False)
    await store.select(k, GROUPED, SERVER, 2, begin=False)
    assert (await store.groups.figures([CAPPED]))[0].capped_ms == 0
    await store.select(k, GROUPED, OTHER_SERVER, 2, begin=False)
    first = (await store.groups.figures([CAPPED]))[0].capped_ms
    await eventually(lambda: _capped_longer(store, first), what="the time on the cap growing")


async def _capped_longer(store: QueueStore, than: int) -> bool:
    await asyncio.sleep(0)
    return (await store.groups.figures([CAPPED]))[0].capped_ms > than
