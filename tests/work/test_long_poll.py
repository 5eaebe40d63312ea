"""Who an insert wakes: the best listed waiter, in the process that holds it and no other (app/work/long_poll.py,
wake in app/queues/lua/includes/wake.lua), with two replicas on one Redis where it takes two."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from app.config import Settings
from app.redis.topology import STANDALONE
from app.work import select as select_module
from app.work.long_poll import Dispatcher, Waiter, parse_wake
from tests.waiting import eventually
from tests.work.conftest import ONLINE, World

NO_FALLBACK_POLL = 60.0  # a waiter woken here was woken by a wake-up, not by its once-a-second retry


def test_a_wake_up_names_its_waiters_and_their_environment() -> None:
    assert parse_wake("3 17\nwlm:notify:LOCAL:PAYROLL") == (["3", "17"], "wlm:notify:LOCAL:PAYROLL")
    assert parse_wake("\nwlm:notify:LOCAL:PAYROLL") == ([], "wlm:notify:LOCAL:PAYROLL")


def test_a_process_has_one_wake_channel_on_one_redis_and_one_per_primary_on_a_cluster() -> None:
    dispatcher = Dispatcher(Redis(), "wlm")
    own = f"wlm:wake:{dispatcher.process}"
    assert dispatcher.wake_channel(STANDALONE) == own
    assert dispatcher.wake_channel("10.0.0.1:7000") == f"{own}@10.0.0.1:7000" != dispatcher.wake_channel("10.0.0.1:7001")
    assert dispatcher.wake_channel(None) not in (own, f"{own}@10.0.0.1:7000")  # a slot not covered: nobody hears it


class _CountedEvent(asyncio.Event):
    """A waiter's event that counts how often it was set (the select clears it when it wakes)."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


class _Watched:
    """One process's dispatcher, watched: its waiters' events (in the order they register) and the channels of the
    messages it heard."""

    def __init__(self, dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dispatcher = dispatcher
        self.waiters: list[Waiter] = []
        self.heard: list[str] = []
        register, on_message = dispatcher.register, dispatcher._on_message

        def watch_register(waiter: Waiter) -> None:
            waiter.event = _CountedEvent()
            self.waiters.append(waiter)
            register(waiter)

        def watch_message(message: dict[str, Any]) -> None:
            self.heard.append(str(message["channel"]))
            on_message(message)

        monkeypatch.setattr(dispatcher, "register", watch_register)
        # The subscription holds the bound method it was given: the wrapper goes where it looks.
        monkeypatch.setattr(dispatcher._notifications, "_on_message", watch_message)

    def woken(self) -> list[Waiter]:
        return [w for w in self.waiters if isinstance(w.event, _CountedEvent) and w.event.sets]


@pytest.fixture(autouse=True)
def no_fallback_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select_module, "POLL_FALLBACK_SECONDS", NO_FALLBACK_POLL)


async def _heard_everything_before(redis_admin: Redis, settings: Settings, *watched: _Watched) -> None:
    """Until each process heard a marker published now: whatever Redis published before it has reached them."""
    marker = f"{settings.redis_prefix}:notify:NOWHERE:{len(watched[0].heard)}"
    await redis_admin.publish(marker, 0)
    await eventually(lambda: all(marker in w.heard for w in watched), what="the marker heard by every process")


def _waiters_key(app: FastAPI) -> str:
    return app.state.wlm.queues.keys("LOCAL", "PAYROLL").waiters  # type: ignore[no-any-return]


async def _waiting(watched: _Watched, redis_admin: Redis, app: FastAPI, count: int) -> list[Waiter]:
    """Until `count` of the process's waiters are listed in Redis (their select found nothing)."""

    async def listed() -> list[Waiter]:
        members = set(await redis_admin.zrange(_waiters_key(app), 0, -1))
        return [w for w in watched.waiters if w.member in members]

    async def enough() -> bool:
        return len(await listed()) == count

    await eventually(enough, what=f"{count} waiters listed")
    return await listed()


async def test_an_insert_wakes_the_best_waiter_only_in_its_own_process(
    app: FastAPI,
    other_app: FastAPI,
    world: World,
    other: httpx.AsyncClient,
    redis_admin: Redis,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    here, there = _Watched(app.state.wlm.dispatcher, monkeypatch), _Watched(other_app.state.wlm.dispatcher, monkeypatch)
    light, heavy = await world.server(weight=1), await world.server(weight=5)
    select = {"wait_seconds": 20, "begin": True}
    light_poll = asyncio.create_task(world.select(light, **select))
    heavy_poll = asyncio.create_task(other.post("/v1/work/select", headers=world.server_key, json={"connect_token": heavy, **select}))
    await _waiting(here, redis_admin, app, 1)
    await _waiting(there, redis_admin, other_app, 1)

    await world.insert({"n": 1})  # through this process: the heavier server waits in the other
    first = await asyncio.wait_for(heavy_poll, 10)
    assert first.status_code == 200 and first.json()["items"][0]["payload"] == {"n": 1}
    await _heard_everything_before(redis_admin, settings, here, there)
    assert here.woken() == [] and not light_poll.done()  # nothing woke this process for the other's work
    assert [w.member for w in await _waiting(here, redis_admin, app, 1)] == [here.waiters[0].member]

    await world.insert({"n": 2})
    second = await asyncio.wait_for(light_poll, 10)
    assert second.status_code == 200 and second.json()["items"][0]["payload"] == {"n": 2}
    assert len(there.woken()) == 1  # the other process was not woken for it


async def test_work_beyond_the_listed_waiters_wakes_nobody(
    app: FastAPI, other_app: FastAPI, world: World, redis_admin: Redis, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a backlog no server waits, so an insert publishes nothing; with one listed waiter, a batch of three
    wakes that one, and no process hears of the other two."""
    here, there = _Watched(app.state.wlm.dispatcher, monkeypatch), _Watched(other_app.state.wlm.dispatcher, monkeypatch)
    await world.insert({"n": 1})
    await _heard_everything_before(redis_admin, settings, here, there)
    assert here.heard == there.heard == [f"{settings.redis_prefix}:notify:NOWHERE:0"]

    server = await world.server(tasks=2)
    await world.select(server, begin=True)  # the backlog's request
    poll = asyncio.create_task(world.select(server, wait_seconds=20, max_items=1))
    await _waiting(here, redis_admin, app, 1)
    batch = {
        "connect_token": world.qm_token,
        "application_environment": "PAYROLL",
        "items": [{"classification": ONLINE, "payload": {"n": n}} for n in range(3)],
    }
    assert (await world.client.post("/v1/work:batch", headers=world.qm, json=batch)).status_code == 201
    assert (await asyncio.wait_for(poll, 10)).status_code == 200
    await _heard_everything_before(redis_admin, settings, here, there)
    assert [c for c in here.heard + there.heard if ":notify:" in c and "NOWHERE" not in c] == []
    assert len(here.woken()) == 1 and there.woken() == []


async def test_a_listed_waiter_of_a_process_gone_passes_its_wake_up_to_every_process(
    app: FastAPI, world: World, redis_admin: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _Watched(app.state.wlm.dispatcher, monkeypatch)
    server = await world.server()
    poll = asyncio.create_task(world.select(server, wait_seconds=20))
    await _waiting(here, redis_admin, app, 1)
    await redis_admin.zadd(_waiters_key(app), {"gone0process:7": -1})  # ranked first: the insert wakes it, and nobody hears
    await world.insert({"n": 1})
    answer = await asyncio.wait_for(poll, 10)
    assert answer.status_code == 200 and answer.json()["items"][0]["payload"] == {"n": 1}
    assert await redis_admin.zrange(_waiters_key(app), 0, -1) == []


async def test_a_wake_up_for_a_waiter_that_left_wakes_another_here_or_goes_to_every_process(
    app: FastAPI, other_app: FastAPI, redis_admin: Redis, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, there = _Watched(app.state.wlm.dispatcher, monkeypatch), _Watched(other_app.state.wlm.dispatcher, monkeypatch)
    channel = app.state.wlm.queues.keys("LOCAL", "PAYROLL").notify_channel
    mine, theirs = Waiter("LOCAL", "PAYROLL", 1, 1, False), Waiter("LOCAL", "PAYROLL", 2, 1, False)
    here.dispatcher.register(mine)
    there.dispatcher.register(theirs)
    await _heard_everything_before(redis_admin, settings, here, there)

    here.dispatcher._on_wake(f"departed\n{channel}")  # its waiter left: another free one here takes its place
    assert mine.event.is_set() and not theirs.event.is_set()
    here.dispatcher._on_wake(f"departed\n{channel}")  # none free here: every process hears it
    await eventually(lambda: theirs.event.is_set() and channel in here.heard and channel in there.heard, what="every process heard it")
    here.dispatcher.unregister(mine)
    there.dispatcher.unregister(theirs)


async def test_a_notify_message_that_is_no_count_wakes_nobody_and_the_process_hears_on(
    app: FastAPI, redis_admin: Redis, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone may publish on a notify channel: what is not a count of wake-ups is dropped, and neither wakes a
    waiter nor ends the subscription (which would wake every waiter when it is back)."""
    here = _Watched(app.state.wlm.dispatcher, monkeypatch)
    waiters = [Waiter("LOCAL", "PAYROLL", n, 1, False) for n in (1, 2)]
    for waiter in waiters:
        here.dispatcher.register(waiter)
    await _heard_everything_before(redis_admin, settings, here)
    channel = app.state.wlm.queues.keys("LOCAL", "PAYROLL").notify_channel
    for data in ("hello", "-1", "", "1.5"):
        await redis_admin.publish(channel, data)
    await _heard_everything_before(redis_admin, settings, here)
    assert here.heard.count(channel) == 4
    assert not any(waiter.event.is_set() for waiter in waiters)
    for waiter in waiters:
        here.dispatcher.unregister(waiter)


async def test_a_long_poll_is_listed_while_it_waits_and_unlisted_when_it_ends(
    app: FastAPI, world: World, redis_admin: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _Watched(app.state.wlm.dispatcher, monkeypatch)
    server = await world.server()
    empty = asyncio.create_task(world.select(server, expect=204, wait_seconds=3))
    await _waiting(here, redis_admin, app, 1)
    await empty

    async def unlisted() -> bool:
        return await redis_admin.zcard(_waiters_key(app)) == 0

    await eventually(unlisted, what="the ended long poll unlisted")
    served = asyncio.create_task(world.select(server, wait_seconds=20))
    await _waiting(here, redis_admin, app, 1)
    await world.insert({"n": 1})
    assert (await asyncio.wait_for(served, 10)).status_code == 200
    assert await redis_admin.zcard(_waiters_key(app)) == 0  # the wake-up took it off the list


async def test_a_wake_up_its_server_cannot_use_goes_to_the_next_waiter(
    app: FastAPI, world: World, redis_admin: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The insert wakes the heavier server, which the manager has just found surplus: its select is refused
    (terminate, 0C14), and the wake-up passes to the other waiting server instead of waiting for its retry."""
    here = _Watched(app.state.wlm.dispatcher, monkeypatch)
    heavy, light = await world.server(weight=5), await world.server(weight=1)
    heavy_poll = asyncio.create_task(world.select(heavy, wait_seconds=20))
    light_poll = asyncio.create_task(world.select(light, wait_seconds=20))
    await _waiting(here, redis_admin, app, 2)
    keys = app.state.wlm.queues.keys("LOCAL", "PAYROLL")
    registered = await redis_admin.hgetall(keys.servers)
    (heavy_id,) = [server_id for server_id, value in registered.items() if json.loads(value)["weight"] == 5]
    await redis_admin.sadd(keys.retire, heavy_id)
    await world.insert({"n": 1})
    retired = await asyncio.wait_for(heavy_poll, 10)
    assert retired.json()["terminate"] is True and retired.json()["items"] == []
    served = await asyncio.wait_for(light_poll, 10)
    assert served.status_code == 200 and served.json()["items"][0]["payload"] == {"n": 1}
