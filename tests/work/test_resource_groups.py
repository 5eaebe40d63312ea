"""Resource groups through the API, on two replicas of the real app over one Redis and database: a group capped at
3 never has a fourth request in flight however many servers select, counted from the work records; a killed
server's slot comes back; a group under its minimum is served before other work of its importance."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx
import pytest
import yaml
from redis.exceptions import ConnectionError as RedisConnectionError

from app.work import records
from tests.conftest import ADMIN
from tests.waiting import eventually
from tests.work.conftest import BATCH, ONLINE, World, grouped_policy, make_world

CAP = 3
SERVERS = 16
REQUESTS = 60


async def _serve_until_done(world: World, replica: httpx.AsyncClient, token: str, done: asyncio.Event) -> None:
    """A server's loop on `replica`: select and begin one, work a moment, end it with the next select."""
    ends: list[dict[str, str]] = []
    while not done.is_set():
        body = {"connect_token": token, "wait_seconds": 0.5, "begin": True, "end": ends}
        response = await replica.post("/v1/work/select", headers=world.server_key, json=body)
        assert response.status_code in (200, 204), response.text
        items = response.json()["items"] if response.status_code == 200 else []
        await asyncio.sleep(random.uniform(0.005, 0.03))  # the work
        ends = [{"token": item["token"]} for item in items]
    if ends:
        await replica.post("/v1/work/select", headers=world.server_key, json={"connect_token": token, "end": ends})


def _most_at_once(rows: list[dict[str, Any]]) -> int:
    """The most requests in flight at one moment: each from its selection up to (not including) its end."""
    moments = sorted([(row["selected_at"], 1) for row in rows] + [(row["ended_at"], -1) for row in rows], key=lambda m: (m[0], m[1]))
    most = current = 0
    for _, change in moments:
        current += change
        most = max(most, current)
    return most


@pytest.mark.timeout(300)
async def test_a_group_capped_at_3_never_has_a_fourth_in_flight_under_16_servers_on_2_replicas(client, other, app):
    world = await make_world(client, grouped_policy([{"name": "LIMITED", "max_in_flight": CAP}], ONLINE="LIMITED"))
    servers = [await world.server() for _ in range(SERVERS)]
    for n in range(REQUESTS):
        await world.insert({"n": n}, classification=ONLINE if n % 4 else BATCH)
    done = asyncio.Event()
    loops = [asyncio.create_task(_serve_until_done(world, (client, other)[i % 2], token, done)) for i, token in enumerate(servers)]
    root = app.state.wlm.settings.records_dir
    try:
        table = await eventually(lambda: (t := records.read(root)).num_rows == REQUESTS and t, 120, what="every request ended")
    finally:
        done.set()
        await asyncio.gather(*loops)
    rows = table.to_pylist()
    online = [row for row in rows if row["service_class"] == "ONLINE"]
    assert all(row["outcome"] == "completed" for row in rows) and len(online) == REQUESTS * 3 // 4
    assert _most_at_once(online) == CAP  # reached, never passed
    assert _most_at_once([row for row in rows if row["service_class"] == "BATCH"]) > 1  # other work ran beside it
    figures = (await client.get("/v1/resource-groups", headers=ADMIN)).json()["items"]
    assert [(g["name"], g["in_flight"], g["max_in_flight"]) for g in figures] == [("LIMITED", 0, CAP)]
    assert figures[0]["capped_seconds"] > 0


async def test_a_killed_server_s_slot_comes_back(client, app):
    world = await make_world(client, grouped_policy([{"name": "ONE", "max_in_flight": 1}], ONLINE="ONE"))
    app.state.wlm.settings.heartbeat_timeout_seconds = 1.5
    killed, alive = await world.server(), await world.server()
    first, second = await world.insert({"n": 1}), await world.insert({"n": 2})
    assert [i["token"] for i in (await world.select(killed)).json()["items"]] == [first["token"]]
    # The slot is held: `alive` finds nothing while `killed` is silent, then gets the first request back (its
    # server taken for dead, its work given back and its slot freed).
    got = (await world.select(alive, wait_seconds=10)).json()["items"]
    assert [(i["token"], i["deliveries"]) for i in got] == [(first["token"], 2)]
    await world.end(alive, first["token"])
    assert [i["token"] for i in (await world.select(alive)).json()["items"]] == [second["token"]]


async def test_a_group_under_its_minimum_is_served_before_work_of_its_importance(client):
    groups = [{"name": "FLOOR", "min_in_flight": 2}]
    document = yaml.safe_load(grouped_policy(groups, REPORTS="FLOOR"))
    for service_class in document["service_classes"]:
        if service_class["name"] == "REPORTS":
            service_class["importance"] = 3  # as important as BATCH's first period, which the policy orders first
    world = await make_world(client, json.dumps(document))
    server = await world.server(tasks=4)
    batch = [(await world.insert({"n": n}, classification=BATCH))["token"] for n in range(3)]
    reports = [(await world.insert({"n": n}, classification={"transaction_class": "RPT1"}))["token"] for n in range(3)]
    # FLOOR has none in flight (under 2): its REPORTS work comes before BATCH's, of the same importance.
    first = [i["token"] for i in (await world.select(server, max_items=2)).json()["items"]]
    assert first == reports[:2]
    # At its minimum it has no preference: BATCH, first in the policy's order, comes next.
    second = [i["token"] for i in (await world.select(server, max_items=2)).json()["items"]]
    assert second == batch[:2]


async def test_work_whose_select_lost_its_settle_is_held_by_the_scheduler_s_pass(client, app, monkeypatch):
    """The select script ran and the settle never did (its process lost Redis): the work it took is counted by the
    select's reservation only, until the scheduler's pass holds it, which it does before the reservation lapses. (A
    group with a min_in_flight settles after the select; on one Redis, one without settles in the select's call.)"""
    world = await make_world(client, grouped_policy([{"name": "PAIR", "max_in_flight": 2, "min_in_flight": 1}], ONLINE="PAIR"))
    server, other = await world.server(), await world.server()
    for n in range(2):
        await world.insert({"n": n})
    groups = app.state.wlm.queues.groups

    async def lost(*_args: object) -> None:
        raise RedisConnectionError("the settle was lost")

    monkeypatch.setattr(groups, "settle_all", lost)
    assert (await world.select(server, expect=503)).status_code == 503
    monkeypatch.undo()
    member = await eventually(lambda: _held(groups, "PAIR"), 60, what="the lost settle's work held")
    assert len(member) == 1 and member[0].endswith("|1|1")  # its first life's first delivery
    # Held and still reserved, it counts twice until the reservation lapses: over the truth, never under.
    await world.select(other, expect=204)  # the cap counts it twice: nothing more fits
    figures = (await client.get("/v1/resource-groups", headers=ADMIN)).json()["items"]
    assert [(g["name"], g["in_flight"]) for g in figures] == [("PAIR", 2)]


async def _held(groups: Any, name: str) -> list[str]:
    return await groups.held_members(name)
