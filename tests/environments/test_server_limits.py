"""IWM4SLI through the API: server limits set by a connected server of the environment or an operator, over the
policy's, until a refresh, a policy that changes them, or a reset; obeyed by the manager at once (servers beyond a new
maximum are told to end) and refused with 4xx where they make no sense."""

from __future__ import annotations

import json

import yaml

from app.servers.performance import evaluate_environment
from app.servers.service import manage_environment
from tests.conftest import ADMIN, EXAMPLE_POLICY, make_key
from tests.work.conftest import World, make_world

LIMITS_PATH = "/v1/application-environments/PAYROLL/server-limits"


def _two_environments(**payroll: object) -> str:
    document = yaml.safe_load(EXAMPLE_POLICY)
    payroll_ae = document["application_environments"][0]
    payroll_ae.update({"start_command": None, "server_limits": {"min": 0, "max": 4}, **payroll})
    document["application_environments"].append({**payroll_ae, "name": "LEDGER"})
    return json.dumps(document)


async def _world(client) -> World:
    return await make_world(client, _two_environments())


async def _limits(client, world: World, server: str, expect: int = 200, **limits: object) -> dict:
    answer = await client.put(LIMITS_PATH, headers=world.server_key, json={"connect_token": server, **limits})
    assert answer.status_code == expect, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def test_the_policy_s_limits_are_shown_until_some_are_set(client) -> None:
    await _world(client)
    shown = (await client.get(LIMITS_PATH, headers=ADMIN)).json()
    assert (shown["min"], shown["max"], shown["spread_min"], shown["source"], shown["set_by"]) == (0, 4, False, "policy", None)
    assert shown["policy_limits"] == {"min": 0, "max": 4, "spread_min": False}


async def test_a_server_sets_its_environment_s_limits_and_they_are_shown_and_audited(client) -> None:
    world = await _world(client)
    server = await world.server()
    answer = await _limits(client, world, server, min=2, max=3, spread_min=True)
    assert (answer["min"], answer["max"], answer["spread_min"], answer["source"], answer["set_by"]) == (2, 3, True, "server", "srv")
    assert (await client.get(LIMITS_PATH, headers=ADMIN)).json() == answer
    displayed = (await client.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()
    assert displayed["server_limits"] == answer
    other = (await client.get("/v1/application-environments/LEDGER", headers=ADMIN)).json()
    assert other["server_limits"]["source"] == "policy"
    [event] = (await client.get("/v1/audit", headers=ADMIN, params={"action": "servers.limits"})).json()["items"]
    assert event["actor"] == "srv" and event["target"] == "PAYROLL"
    assert event["detail"] | {"min": 2, "max": 3, "source": "server"} == event["detail"]


async def test_the_manager_decides_under_the_limits_set(client, app) -> None:
    world = await _world(client)
    server = await world.server()
    await _limits(client, world, server, min=3, max=3)
    state = app.state.wlm
    policy = await state.policies.active()
    keys = state.queues.keys("LOCAL", "PAYROLL")
    judged = await evaluate_environment(state.queues, policy, keys, 60)
    decision = await manage_environment(state.queues, policy, keys, judged, 60, launching=False)
    assert decision.desired_total == 3  # the policy's min is 0


async def test_servers_beyond_a_new_maximum_are_told_to_end_at_once(client) -> None:
    world = await _world(client)
    older, newer = await world.server(), await world.server()
    await world.insert({"n": 1})
    await _limits(client, world, older, min=0, max=1)
    told = (await world.select(newer)).json()  # no manager pass in between
    assert told["terminate"] is True and told["reason_code"] == "0C14" and told["items"] == []
    assert len((await world.select(older)).json()["items"]) == 1


async def test_an_operator_sets_and_resets_the_limits(client) -> None:
    await _world(client)
    operator = await make_key(client, "op", ["operator"])
    answer = await client.put(LIMITS_PATH, headers=operator, json={"min": 1, "max": 2})
    assert answer.status_code == 200 and answer.json()["source"] == "operator" and answer.json()["set_by"] == "op"
    reset = await client.delete(LIMITS_PATH, headers=operator)
    assert reset.status_code == 200 and reset.json()["source"] == "policy" and reset.json()["max"] == 4
    actions = [
        event["detail"] for event in (await client.get("/v1/audit", headers=ADMIN, params={"action": "servers.limits"})).json()["items"]
    ]
    assert actions[0] == {"reset": True} and actions[1]["source"] == "operator"


async def test_a_refresh_puts_the_policy_s_limits_back(client) -> None:
    world = await _world(client)
    await _limits(client, world, await world.server(), min=0, max=1)
    refreshed = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,APPLENV=PAYROLL,REFRESH"})
    assert refreshed.status_code == 200, refreshed.text
    assert (await client.get(LIMITS_PATH, headers=ADMIN)).json()["source"] == "policy"


async def test_a_policy_keeps_the_limits_set_unless_it_changes_the_environment_s_own(client) -> None:
    world = await _world(client)
    await _limits(client, world, await world.server(), min=0, max=1)
    same = await client.put(
        "/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=_two_environments(completion_time_ms=20_000)
    )
    assert same.status_code == 200, same.text
    assert (await client.get(LIMITS_PATH, headers=ADMIN)).json()["max"] == 1
    changed = _two_environments(server_limits={"min": 0, "max": 6})
    assert (await client.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=changed)).status_code == 200
    shown = (await client.get(LIMITS_PATH, headers=ADMIN)).json()
    assert (shown["max"], shown["source"]) == (6, "policy")


async def test_limits_that_make_no_sense_are_refused(client) -> None:
    world = await _world(client)
    server = await world.server()
    refused = await _limits(client, world, server, expect=422, min=3, max=2)
    assert refused["error"]["code"] == "validation_failed" and "min (3) exceeds max (2)" in json.dumps(refused)
    unknown = await client.put(
        "/v1/application-environments/NOPE/server-limits", headers=world.server_key, json={"connect_token": server, "max": 2}
    )
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_application_environment"
    other = await client.put(
        "/v1/application-environments/LEDGER/server-limits", headers=world.server_key, json={"connect_token": server, "max": 2}
    )
    assert other.status_code == 403 and other.json()["error"]["code"] == "other_application_environment"
    without_token = await client.put(LIMITS_PATH, headers=world.server_key, json={"max": 2})
    assert without_token.status_code == 403 and without_token.json()["error"]["code"] == "missing_role"
    not_its_token = await client.put(LIMITS_PATH, headers=ADMIN, json={"connect_token": server, "max": 2})
    assert not_its_token.status_code == 404 and not_its_token.json()["error"]["code"] == "unknown_connection"
    assert (await client.get(LIMITS_PATH, headers=ADMIN)).json()["source"] == "policy"  # nothing refused was kept
