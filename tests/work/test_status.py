"""A request's own status (GET /v1/work/{token}) on the real app, Redis and databases: each state it can be in, for
its queue manager's principal and an operator only, its position in its class queue as requests ahead leave, its
expected start, the cause it waits for, and 404 once its tombstone is gone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings
from app.servers.performance import evaluate_environment
from app.state import AppState
from tests.conftest import ADMIN, make_key
from tests.waiting import eventually
from tests.work.conftest import BATCH, QM, World, grouped_policy, make_world


async def status(world: World, token: str, headers: dict[str, str] | None = None, expect: int = 200) -> dict[str, Any]:
    response = await world.client.get(f"/v1/work/{token}", headers=headers or world.qm)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def positions(world: World, tokens: list[str]) -> list[int | None]:
    return [(await status(world, token))["position"] for token in tokens]


def wlm(app: FastAPI) -> AppState:
    return app.state.wlm  # type: ignore[no-any-return]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The manager's decisions are the tests' own: its loop judges goals once, at the start, before any work."""
    return settings.model_copy(update={"goal_interval_seconds": 3600.0})


async def test_a_request_through_each_state(world: World) -> None:
    queued = await world.insert({"n": 1}, classification=BATCH)
    answer = await status(world, queued["token"])
    assert answer["state"] == "queued" and (answer["service_class"], answer["period"], answer["deliveries"]) == ("BATCH", 1, 0)
    assert (answer["position"], answer["delay_cause"], answer["outcome"]) == (0, "no_server", None)
    assert (answer["application_environment"], answer["node"]) == ("PAYROLL", "LOCAL") and answer["inserted_at"]

    server = await world.server()
    await world.select(server)
    answer = await status(world, queued["token"])
    assert (answer["state"], answer["deliveries"], answer["position"], answer["delay_cause"]) == ("selected", 1, None, None)
    begun = await world.client.post(f"/v1/work/{queued['token']}/begin", headers=world.server_key, json={"connect_token": server})
    assert begun.status_code == 200
    assert (await status(world, queued["token"]))["state"] == "begun"
    await world.end(server, queued["token"])
    answer = await status(world, queued["token"])
    assert (answer["state"], answer["outcome"], answer["service_class"]) == ("ended", "completed", None)

    deleted = await world.insert({"n": 2})
    response = await world.client.delete(f"/v1/work/{deleted['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert response.status_code == 200
    assert ((answer := await status(world, deleted["token"]))["state"], answer["outcome"]) == ("deleted", "deleted")

    dead = await world.insert({"n": 3})
    await world.select(server)
    await world.end(server, dead["token"], outcome="failed", dead_letter=True, error="no stock")
    answer = await status(world, dead["token"])
    assert (answer["state"], answer["outcome"], answer["service_class"], answer["deliveries"]) == ("dead", "failed", "ONLINE", 1)
    assert answer["period"] == 1


async def test_only_its_queue_managers_principal_and_an_operator_see_it(world: World) -> None:
    token = (await world.insert({"n": 1}))["token"]
    unknown = await world.client.get("/v1/work/LOCAL~PAYROLL~nosuchrequest", headers=world.qm)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_work"

    other_qm = await make_key(world.client, "other-qm", ["queue_manager"])
    viewer = await make_key(world.client, "viewer", ["viewer"])
    for stranger in (other_qm, viewer, world.server_key):
        response = await world.client.get(f"/v1/work/{token}", headers=stranger)
        assert (response.status_code, response.json()) == (404, unknown.json())  # as for a token that never was
    operator = await make_key(world.client, "op", ["operator"])
    assert (await status(world, token, operator))["state"] == "queued"
    assert (await status(world, token, ADMIN))["state"] == "queued"

    # Another connection of the same principal sees it too, and so does the principal once that one has gone.
    again = await world.client.post("/v1/connections", headers=world.qm, json=QM)
    assert again.status_code == 201
    assert (await world.client.delete(f"/v1/connections/{again.json()['token']}", headers=world.qm)).status_code == 200
    assert (await status(world, token))["state"] == "queued"
    assert (await world.client.get("/v1/work/not-a-token", headers=world.qm)).json() == unknown.json()


async def test_an_ended_request_answers_until_its_tombstone_goes(world: World, app: FastAPI) -> None:
    server = await world.server()
    token = (await world.insert({"n": 1}))["token"]
    await world.select(server)
    await world.end(server, token)
    assert (await status(world, token))["state"] == "ended"
    state = wlm(app)
    for bucket in state.queues.keys("LOCAL", "PAYROLL").tombstones:  # its bound passed: the buckets expire whole
        await state.queues.redis.pexpire(bucket, 1)

    async def forgotten() -> bool:
        return (await world.client.get(f"/v1/work/{token}", headers=world.qm)).status_code == 404

    await eventually(forgotten, 10, what="the tombstone forgotten")


async def test_positions_count_the_requests_ahead_as_they_leave(world: World) -> None:
    tokens = [(await world.insert({"n": n}))["token"] for n in range(5)]
    later = [(await world.insert({"n": n}, classification=BATCH))["token"] for n in range(2)]
    assert await positions(world, tokens) == [0, 1, 2, 3, 4] and await positions(world, later) == [0, 1]

    server = await world.server(tasks=5)
    (item,) = (await world.select(server)).json()["items"]
    assert item["token"] == tokens[0]
    response = await world.client.delete(f"/v1/work/{tokens[2]}", headers=world.qm, params={"connect_token": world.qm_token})
    assert response.status_code == 200
    assert await positions(world, [tokens[1], tokens[3], tokens[4]]) == [0, 1, 2]
    assert await positions(world, later) == [0, 1]


async def test_why_it_waits(world: World, app: FastAPI) -> None:
    state = wlm(app)
    keys = state.queues.keys("LOCAL", "PAYROLL")
    first = (await world.insert({"n": 1}))["token"]
    assert (await status(world, first))["delay_cause"] == "no_server"

    server = await world.server(tasks=2)
    await world.select(server)  # takes the first; a task is free for the next
    second = (await world.insert({"n": 2}))["token"]
    assert (await status(world, second))["delay_cause"] is None
    await state.queues.results.publish_decision(keys, {}, [], {"ONLINE": 3})  # the manager wants more than the one connected
    assert (await status(world, second))["delay_cause"] == "servers_starting"
    await state.queues.results.publish_decision(keys, {}, [], {"ONLINE": 1})

    await world.select(server)  # takes the second: both tasks hold ONLINE work
    batch = (await world.insert({"n": 3}, classification=BATCH))["token"]
    assert (await status(world, batch))["delay_cause"] == "busy_higher"

    quiesce = await world.client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"})
    assert quiesce.status_code == 200, quiesce.text
    answer = await status(world, batch)
    assert (answer["delay_cause"], answer["expected_wait_ms"], answer["expected_start_at"]) == ("environment_state", None, None)


async def test_busy_with_less_important_work_and_given_back(world: World, app: FastAPI) -> None:
    server = await world.server(tasks=1)
    batch = (await world.insert({"n": 1}, classification=BATCH))["token"]
    await world.select(server)
    online = (await world.insert({"n": 2}))["token"]
    assert (await status(world, online))["delay_cause"] == "busy_lower"

    state = wlm(app)
    await state.queues.redis.zadd(state.queues.keys("LOCAL", "PAYROLL").leases, {batch.rsplit("~", 1)[1]: 0})  # its time is up

    async def given_back() -> bool:
        return (await status(world, batch))["state"] == "queued"

    await eventually(given_back, 10, what="the request given back")
    answer = await status(world, batch)
    assert (answer["delay_cause"], answer["deliveries"], answer["position"]) == ("redelivery", 1, 0)


async def test_a_class_whose_resource_group_is_at_its_cap(client: httpx.AsyncClient) -> None:
    world = await make_world(client, grouped_policy([{"name": "ONE", "max_in_flight": 1}], ONLINE="ONE"))
    server = await world.server(tasks=2)
    await world.insert({"n": 1})
    await world.select(server)
    second = (await world.insert({"n": 2}))["token"]
    assert (await status(world, second))["delay_cause"] == "group_cap"


async def test_the_expected_start_from_the_position_and_the_class_s_execution_time(world: World, app: FastAPI) -> None:
    server = await world.server(tasks=1)
    for n in range(3):
        token = (await world.insert({"n": n}))["token"]
        await world.select(server)
        await world.end(server, token)
    assert (await status(world, (await world.insert({"n": 3}))["token"]))["expected_wait_ms"] is None  # nothing judged yet
    state = wlm(app)
    (judged,) = [
        p
        for p in await evaluate_environment(state.queues, await state.policies.active(), state.queues.keys("LOCAL", "PAYROLL"), 60)
        if p.service_class == "ONLINE"
    ]
    await world.select(server)  # the only task is taken
    tokens = [(await world.insert({"n": n}))["token"] for n in range(4, 7)]
    answer = await status(world, tokens[2])
    assert answer["position"] == 2 and answer["delay_cause"] == "busy_higher"
    assert judged.avg_execution_ms is not None
    assert answer["expected_wait_ms"] == round(3 * judged.avg_execution_ms)  # two ahead and itself, on one task
    assert answer["expected_start_at"] is not None
