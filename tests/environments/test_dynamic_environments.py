"""Dynamic application environments (IWM4AEDF): defined by a queue manager, in its scope only, removed when it
disconnects; on the real app, Redis and database."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml

from app.config import Settings
from app.main import create_app
from app.work import records
from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key
from tests.waiting import eventually
from tests.work.conftest import ONLINE, QM, World, make_world

DYNAMIC = {"name": "dyn1", "server_limits": {"min": 0, "max": 4}, "completion_time_ms": 30_000}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # A departed queue manager's environment is forgotten this long after its caches can no longer let work in.
    return settings.model_copy(update={"connection_cache_seconds": 0.2})


async def define(world: World, body: dict[str, Any] | None = None, expect: int = 201, **headers: str) -> dict[str, Any]:
    response = await world.client.post(
        "/v1/application-environments", headers=headers or world.qm, json={"connect_token": world.qm_token, **(body or DYNAMIC)}
    )
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def second_queue_manager(client: httpx.AsyncClient, subsystem_name: str = "BANK2") -> World:
    key = await make_key(client, f"qm-{subsystem_name.lower()}", ["queue_manager"])
    response = await client.post("/v1/connections", headers=key, json={**QM, "subsystem_name": subsystem_name})
    assert response.status_code == 201, response.text
    server_key = await make_key(client, f"srv-{subsystem_name.lower()}", ["server"], ["CB.**"])
    return World(client, key, response.json()["token"], server_key)


async def connect_server(world: World, subsystem_name: str = "BANK1", expect: int = 201) -> dict[str, Any]:
    body = {
        "role": "server",
        "subsystem_type": "CB",
        "subsystem_name": subsystem_name,
        "application_environment": "DYN1",
        "worker_tasks": 2,
    }
    response = await world.client.post("/v1/connections", headers=world.server_key, json=body)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def insert(world: World, payload: Any, expect: int = 201) -> dict[str, Any]:
    body = {"connect_token": world.qm_token, "application_environment": "DYN1", "classification": ONLINE, "payload": payload}
    response = await world.client.post("/v1/work", headers=world.qm, json=body)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
async def world(client: httpx.AsyncClient) -> World:
    world = await make_world(client)
    world.server_key = await make_key(client, "srv-dyn", ["server"], ["CB.**"])
    return world


async def test_a_queue_manager_defines_an_environment_and_a_repeat_is_answered_with_it(world):
    defined = await define(world)
    assert defined["name"] == "DYN1" and defined["subsystem_type"] == "CB" and defined["subsystem_name"] == "BANK1"
    assert defined["server_limits"]["max"] == 4 and defined["completion_time_ms"] == 30_000
    again = await define(world, expect=200)
    assert again == defined
    refused = await define(world, {**DYNAMIC, "completion_time_ms": 1000}, expect=409)
    assert refused["error"]["code"] == "defined_differently"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({**DYNAMIC, "name": "payroll"}, 409, "static_application_environment"),
        ({**DYNAMIC, "start_command": ["rm", "-rf", "/"]}, 422, "validation_failed"),  # the service runs only the admin's commands
        ({**DYNAMIC, "nodes": ["ELSEWHERE"]}, 422, "validation_failed"),
        ({**DYNAMIC, "server_limits": {"min": 5, "max": 2}}, 422, "validation_failed"),
        ({**DYNAMIC, "name": "no spaces"}, 422, "validation_failed"),
        ({**DYNAMIC, "completion_time_ms": 3_600_000}, 422, "validation_failed"),  # longer than the tombstones are kept
    ],
)
async def test_refusals(world, body, status, code):
    assert (await define(world, body, expect=status))["error"]["code"] == code


async def test_only_a_connected_queue_manager_defines_one(world, client):
    server = await make_key(client, "srv-only", ["server"], ["CB.**"])
    assert (await define(world, expect=403, **server))["error"]["code"] == "missing_role"
    await client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    assert (await define(world, expect=409))["error"]["code"] == "not_a_queue_manager"


async def test_a_name_is_one_queue_managers_at_a_time_and_each_has_a_limit(world, client, app):
    other = await second_queue_manager(client)
    await define(world)
    assert (await define(other, expect=409))["error"]["code"] == "application_environment_in_use"
    app.state.wlm.settings.max_dynamic_environments = 2
    await define(other, {**DYNAMIC, "name": "dyn2"})
    await define(other, {**DYNAMIC, "name": "dyn3"})
    assert (await define(other, {**DYNAMIC, "name": "dyn4"}, expect=409))["error"]["code"] == "too_many_dynamic"


async def test_work_and_servers_stay_in_the_defining_queue_managers_scope(world, client):
    other = await second_queue_manager(client)
    await define(world)
    await connect_server(world)
    assert (await connect_server(other, subsystem_name="BANK2", expect=403))["error"]["code"] == "outside_scope"
    assert (await insert(other, {"n": 1}, expect=403))["error"]["code"] == "outside_scope"
    queued = await insert(world, {"n": 1})
    assert queued["application_environment"] == "DYN1" and queued["service_class"] == "ONLINE"


async def test_the_operator_sees_and_varies_it_as_dynappl(world, client):
    await define(world)
    await insert(world, {"n": 1})
    listed = (await client.get("/v1/application-environments", headers=ADMIN, params={"dynamic": "true"})).json()["items"]
    assert [(ae["name"], ae["dynamic"], ae["queued_total"]) for ae in listed] == [("DYN1", True, 1)]
    static = (await client.get("/v1/application-environments", headers=ADMIN)).json()["items"]
    assert [ae["name"] for ae in static] == ["PAYROLL"]
    wrong = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,APPLENV=DYN1,QUIESCE"})
    assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "dynamic"
    varied = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "vary wlm,dynappl=dyn1,quiesce"})
    assert varied.status_code == 200 and varied.json()["state"] == "QUIESCING"

    async def shown() -> list[tuple[str, str]]:
        response = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "D WLM,DYNAPPL=*"})
        return [(ae["name"], ae["state"]) for ae in response.json()["items"]]

    await eventually(lambda: _equal(shown(), [("DYN1", "QUIESCED")]))  # no server to wait for


async def test_it_goes_with_its_queue_manager_and_leaves_nothing_unfinished(world, client, app):
    await define(world)
    server = (await connect_server(world))["token"]
    tokens = [(await insert(world, {"n": n}))["token"] for n in range(3)]
    held = (await world.select(server, max_items=1)).json()["items"]
    assert [item["token"] for item in held] == tokens[:1]
    await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,DYNAPPL=DYN1,QUIESCE"})

    gone = await client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    assert gone.status_code == 200 and gone.json()["purged"] == 2 and gone.json()["removed_application_environments"] == ["DYN1"]
    # Its server ends what it holds and is told to go; no one can queue to the name any more.
    answer = (await world.select(server, end=[{"token": tokens[0]}])).json()
    assert answer["ended"][0]["token"] == tokens[0] and answer["terminate"] and answer["reason_code"] == "0C14"
    newcomer = await second_queue_manager(client, "BANK1")
    assert (await insert(newcomer, {"n": 4}, expect=404))["error"]["code"] == "unknown_application_environment"
    # Each of the three requests has its one record, written although the environment left the policy.
    root = app.state.wlm.settings.records_dir
    table = await eventually(lambda: (t := records.read(root)).num_rows == 3 and t)
    assert sorted(row["outcome"] for row in table.to_pylist()) == ["completed", "purged", "purged"]
    retired = app.state.wlm.queues.environments.retired
    await eventually(lambda: _nothing_retired(retired), timeout=10)
    # The name is free again, and its operator state went with it: the next definition starts AVAILABLE.
    await define(newcomer, {**DYNAMIC})
    listed = (await client.get("/v1/application-environments", headers=ADMIN, params={"dynamic": "true"})).json()["items"]
    assert [(ae["name"], ae["state"], ae["queued_total"]) for ae in listed] == [("DYN1", "AVAILABLE", 0)]


async def test_a_static_environment_may_not_take_a_live_dynamic_name(world, client):
    await define(world)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"].append({"name": "DYN1", "subsystem_type": "CB"})
    response = await client.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))
    assert response.status_code == 409 and response.json()["error"]["code"] == "dynamic_name_in_use"
    await client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    await install_policy(client, json.dumps(document), "application/json")


async def test_another_replica_knows_it_at_once(world, settings):
    # A second app on the same database and Redis, as another replica would be; its policy cache is warm.
    replica = create_app(settings)
    async with replica.router.lifespan_context(replica):
        transport = httpx.ASGITransport(app=replica, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://wlm") as other:
            assert (await other.get("/v1/policy", headers=ADMIN)).status_code == 200
            await define(world)
            elsewhere = World(other, world.qm, world.qm_token, world.server_key)
            assert (await insert(elsewhere, {"n": 1}))["application_environment"] == "DYN1"
            server = (await connect_server(elsewhere))["token"]
            assert len((await elsewhere.select(server)).json()["items"]) == 1


async def _nothing_retired(retired: Any) -> bool:
    return not await retired()


async def _equal(value: Any, expected: Any) -> bool:
    return await value == expected  # type: ignore[no-any-return]
