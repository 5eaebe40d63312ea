"""The slow queue sweeper on the real app, Redis and database (SQLite and PostgreSQL): a swept queue keeps its
order through selects, deletes, purges and displays, and a sweep that races with a select or delete is aborted."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from app.errors import Fenced
from app.queues.keys import AeKeys, parse_token, queue_name
from app.queues.store import QueueStore
from app.state import AppState
from app.sweeper.models import SweptBlob, SweptRequest
from app.sweeper.service import Sweeper
from tests.conftest import ADMIN
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both
from tests.waiting import eventually
from tests.work.conftest import BATCH, ONLINE, World, make_world

ONLINE_QUEUE = queue_name("ONLINE", False)


@pytest.fixture
async def world(client: httpx.AsyncClient) -> World:
    return await make_world(client)


@pytest.fixture
def state(app: FastAPI) -> AppState:
    return app.state.wlm  # type: ignore[no-any-return]


def sweeper(state: AppState, epoch: int = 0) -> Sweeper:
    assert state.queues.blobs is not None
    return Sweeper(state.queues, state.queues.blobs, state.settings, epoch)


async def insert(world: World, count: int, classification: dict[str, str] = ONLINE, first: int = 0) -> list[str]:
    items = [{"classification": classification, "payload": {"n": first + i, "pad": "x" * 50}} for i in range(count)]
    body = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "items": items}
    response = await world.client.post("/v1/work:batch", headers=world.qm, json=body)
    assert response.status_code == 201, response.text
    return [item["token"] for item in response.json()["items"]]


def keys_of(state: AppState, token: str) -> AeKeys:
    parsed = parse_token(token)
    assert parsed is not None
    return state.queues.keys(parsed[0], parsed[1])


async def drain(world: World, server: str, per_select: int = 7) -> list[str]:
    """Select and end everything queued, a few at a time; the tokens in the order they came."""
    order: list[str] = []
    while True:
        response = await world.select(server, expect=None, max_items=per_select)
        if response.status_code == 204:
            return order
        assert response.status_code == 200, response.text
        tokens = [item["token"] for item in response.json()["items"]]
        order += tokens
        for token in tokens:
            await world.end(server, token)


async def in_memory(store: QueueStore, k: AeKeys) -> int:
    return await store.redis.hlen(k.req)  # type: ignore[no-any-return,misc]


async def database_counts(state: AppState) -> tuple[int, int]:
    async with state.sessions() as session:
        blobs = await session.scalar(select(func.count()).select_from(SweptBlob))
        swept = await session.scalar(select(func.count()).select_from(SweptRequest))
    return blobs or 0, swept or 0


async def test_a_swept_queue_keeps_a_buffer_in_memory_and_comes_back_in_order(world: World, state: AppState) -> None:
    tokens = await insert(world, 40)
    k = keys_of(state, tokens[0])
    report = await sweeper(state).sweep_environment(k, ["ONLINE", "BATCH"])
    # Never served: the buffer is 0 + 5; the other 35 went to the database in blobs of at most 10.
    assert report.queues == {ONLINE_QUEUE: 35} and report.aborted == 0
    assert await in_memory(state.queues, k) == 5
    sizes = await state.queues.sweep.queue_sizes(k, ONLINE_QUEUE)
    assert (sizes.front, sizes.rear, len(sizes.chain), sizes.swept) == (5, 0, 4, 35)
    assert await database_counts(state) == (4, 35)

    # Inserted while swept: to the rear, behind the swept part; the next pass moves the rear too.
    tokens += await insert(world, 12, first=40)
    assert (await state.queues.sweep.queue_sizes(k, ONLINE_QUEUE)).rear == 12
    report = await sweeper(state).sweep_environment(k, ["ONLINE", "BATCH"])
    assert report.queues == {ONLINE_QUEUE: 12}
    sizes = await state.queues.sweep.queue_sizes(k, ONLINE_QUEUE)
    assert (sizes.front, sizes.rear, len(sizes.chain), sizes.swept) == (5, 0, 6, 47)

    status = await world.client.get("/v1/sweeper", headers=ADMIN)
    assert status.status_code == 200, status.text
    (swept_queue,) = status.json()["queues"]
    assert swept_queue["service_class"] == "ONLINE" and not swept_queue["dependent"]
    assert (swept_queue["in_memory_front"], swept_queue["in_database"], swept_queue["blobs"]) == (5, 47, 6)

    # The display counts the swept requests as queued.
    display = await world.client.get("/v1/application-environments/PAYROLL", headers=ADMIN)
    assert display.status_code == 200, display.text
    assert display.json()["queued"] == {"ONLINE": 52} and display.json()["queued_total"] == 52

    server = await world.server(tasks=20)
    assert await drain(world, server) == tokens  # each once, in insertion order
    sizes = await state.queues.sweep.queue_sizes(k, ONLINE_QUEUE)
    assert (sizes.front, sizes.rear, sizes.chain, sizes.swept) == (0, 0, [], 0)
    assert await database_counts(state) == (0, 0)
    assert (await world.client.get("/v1/sweeper", headers=ADMIN)).json()["queues"] == []


async def test_the_buffer_is_the_service_rate_plus_five(world: World, state: AppState) -> None:
    tokens = await insert(world, 60)
    k = keys_of(state, tokens[0])
    server = await world.server(tasks=20)
    served = await drain_some(world, server, 8)
    report = await sweeper(state).sweep_environment(k, ["ONLINE"])
    # 8 selected since the last look: 52 > 16 in memory, so all but 8 + 5 move out.
    assert report.queues == {ONLINE_QUEUE: 52 - 13}
    assert await in_memory(state.queues, k) == 13
    assert served + await drain(world, server) == tokens


async def drain_some(world: World, server: str, count: int) -> list[str]:
    response = await world.select(server, max_items=count)
    tokens = [item["token"] for item in response.json()["items"]]
    for token in tokens:
        await world.end(server, token)
    return tokens


async def test_a_select_that_takes_a_request_being_swept_aborts_the_sweep(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    sweeping = sweeper(state)
    pending = await sweeping.begin(k, ONLINE_QUEUE, "front", 5, 25)
    assert [e.id for e in pending.entries] == [parse_token(t)[2] for t in tokens[5:]]  # type: ignore[index]
    server = await world.server(tasks=40)
    taken = await drain_some(world, server, 8)  # the 5 of the buffer and 3 being swept
    assert await sweeping.complete(pending) is None  # aborted
    assert await database_counts(state) == (0, 0)  # its blob forgotten
    assert await in_memory(state.queues, k) == 22  # nothing left memory
    assert taken + await drain(world, server) == tokens


async def test_a_delete_of_a_request_being_swept_aborts_the_sweep(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    sweeping = sweeper(state)
    pending = await sweeping.begin(k, ONLINE_QUEUE, "front", 5, 25)
    response = await world.client.delete(f"/v1/work/{tokens[17]}", headers=world.qm, params={"connect_token": world.qm_token})
    assert response.status_code == 200, response.text
    assert await sweeping.complete(pending) is None
    assert await database_counts(state) == (0, 0)
    server = await world.server(tasks=40)
    assert await drain(world, server) == tokens[:17] + tokens[18:]


async def test_a_sweep_that_raced_only_with_work_outside_it_commits(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    sweeping = sweeper(state)
    pending = await sweeping.begin(k, ONLINE_QUEUE, "front", 5, 25)
    server = await world.server(tasks=40)
    taken = await drain_some(world, server, 3)  # from the buffer only
    tokens += await insert(world, 4, first=30)  # to the rear while the sweep runs
    assert (await state.queues.sweep.queue_sizes(k, ONLINE_QUEUE)).rear == 4
    assert await sweeping.complete(pending) == 25
    assert await database_counts(state) == (3, 25)  # blobs of at most 10
    assert taken + await drain(world, server) == tokens


async def test_a_swept_request_can_be_deleted_and_does_not_come_back(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    await sweeper(state).sweep_environment(k, ["ONLINE"])
    assert await in_memory(state.queues, k) == 5
    victim = tokens[20]
    params = {"connect_token": world.qm_token}
    other_qm = await world.client.post(
        "/v1/connections", headers=world.qm, json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK2"}
    )
    response = await world.client.delete(f"/v1/work/{victim}", headers=world.qm, params={"connect_token": other_qm.json()["token"]})
    assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_work"  # another queue manager's
    response = await world.client.delete(f"/v1/work/{victim}", headers=world.qm, params=params)
    assert response.status_code == 200, response.text
    response = await world.client.delete(f"/v1/work/{victim}", headers=world.qm, params=params)
    assert response.status_code == 409 and response.json()["error"]["code"] == "already_ended"
    assert int(await state.redis.hget(k.depth, "ONLINE")) == 29  # type: ignore[misc]
    server = await world.server(tasks=40)
    assert await drain(world, server) == [t for t in tokens if t != victim]
    assert await state.redis.scard(k.swept_deleted) == 0  # type: ignore[misc]


async def test_a_swept_request_answers_queued_with_its_position(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    await sweeper(state).sweep_environment(k, ["ONLINE"])
    tokens += await insert(world, 3, first=30)  # behind the swept part, at the rear
    response = await world.client.delete(f"/v1/work/{tokens[12]}", headers=world.qm, params={"connect_token": world.qm_token})
    assert response.status_code == 200, response.text
    del tokens[12]

    async def status(token: str) -> dict[str, Any]:
        response = await world.client.get(f"/v1/work/{token}", headers=world.qm)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    swept = await status(tokens[20])
    assert (swept["state"], swept["service_class"], swept["position"], swept["delay_cause"]) == ("queued", "ONLINE", 20, "no_server")
    assert [(await status(token))["position"] for token in tokens] == list(range(len(tokens)))
    assert (await world.client.get(f"/v1/work/{tokens[20]}", headers=ADMIN)).json()["position"] == 20
    server = await world.server(tasks=40)
    drained = await drain(world, server, per_select=4)
    assert drained == tokens and (await status(tokens[20]))["state"] == "ended"


async def test_a_departing_queue_manager_purges_its_swept_requests(world: World, state: AppState, app: FastAPI) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    await sweeper(state).sweep_environment(k, ["ONLINE"])
    response = await world.client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    assert response.status_code == 200, response.text
    assert response.json()["purged"] == 30  # 5 in memory, 25 in the database
    assert int(await state.redis.hget(k.depth, "ONLINE")) == 0  # type: ignore[misc]
    # The blobs whose requests were all purged are gone: once its records are written, the environment holds nothing.
    assert await eventually(lambda: state.queues.environments.drained(k))
    assert await database_counts(state) == (0, 0)


async def test_a_swept_important_class_comes_before_a_less_important_one_in_memory(world: World, state: AppState) -> None:
    online = await insert(world, 20)
    k = keys_of(state, online[0])
    await sweeper(state).sweep_environment(k, ["ONLINE"])  # ONLINE: 5 in memory, 15 in the database
    batch = await insert(world, 3, classification=BATCH)
    server = await world.server(tasks=40)
    assert await drain(world, server, per_select=4) == online + batch


async def test_two_processes_bringing_the_same_blob_back_restore_it_once(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    await sweeper(state).sweep_environment(k, ["ONLINE"])
    server = await world.server(tasks=40)
    first = await drain_some(world, server, 5)  # the buffer: the front is empty now
    # Both read the chain's first blob; one restores it, the other finds it restored.
    sweep, blobs = state.queues.sweep, state.queues.blobs
    assert blobs is not None
    head = int(await state.redis.lindex(k.chain(ONLINE_QUEUE), 0))  # type: ignore[misc]
    entries = await blobs.read(head)
    assert entries is not None and len(entries) == 10  # blobs of at most 10: the first of the 25 swept
    restored = await asyncio.gather(sweep.restore(k, ONLINE_QUEUE, head, entries), sweep.restore(k, ONLINE_QUEUE, head, entries))
    assert sorted(restored) == [0, 10]
    assert await sweep.restore(k, ONLINE_QUEUE, head, entries) == 0
    assert first + await drain(world, server) == tokens


async def test_a_deposed_schedulers_sweep_is_fenced(world: World, state: AppState) -> None:
    tokens = await insert(world, 30)
    k = keys_of(state, tokens[0])
    await state.redis.set(k.fence, 3)
    with pytest.raises(Fenced):
        await sweeper(state, epoch=2).sweep_environment(k, ["ONLINE"])
    assert await in_memory(state.queues, k) == 30
    report = await sweeper(state, epoch=3).sweep_environment(k, ["ONLINE"])
    assert report.swept == 25
