"""Operator commands (VARY, and DISPLAY as a command) over HTTP, on the real app, Redis and databases; the display's own
routes are tests/environments/test_display.py's."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from app.operator.service import apply_event
from app.operator.states import AEState, InternalEvent
from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key

pytestmark = pytest.mark.asyncio


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """No background duties: the manager loop would report servers drained (there are none here) within a fraction of a
    second; these tests report the internal events themselves, through apply_event, when they mean to."""
    settings.background_duties = False
    return settings


QUIESCE = {"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"}
RESUME = {"command": "V WLM,APPLENV=PAYROLL,RESUME"}


async def send(client: httpx.AsyncClient, body: Any, headers: dict[str, str] = ADMIN, expect: int = 200) -> dict[str, Any]:
    response = await client.post("/v1/operator/commands", headers=headers, json=body)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def event(app: FastAPI, name: str, happened: InternalEvent, reason: str = "") -> AEState:
    """What the manager loop does when it observes `happened`."""
    state = app.state.wlm
    async with state.sessions() as session:
        return await apply_event(session, state.operator, name, happened, reason)


async def shown(client: httpx.AsyncClient, name: str = "PAYROLL") -> dict[str, Any]:
    response = await client.get(f"/v1/application-environments/{name}", headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def commands(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get("/v1/operator/commands", headers=ADMIN, params=params)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def without(name: str) -> str:
    """The example policy with application environment PAYROLL renamed to `name`."""
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0]["name"] = name
    return json.dumps(document)


# --------------------------------------------------------------------------------------------------------------------
# VARY
# --------------------------------------------------------------------------------------------------------------------


async def test_quiesce_as_typed_answers_the_canonical_command(client):
    await install_policy(client)
    before = await shown(client)
    assert before["state"] == "AVAILABLE" and before["changed_at"] is None and before["reason"] is None
    result = await send(client, {"command": "vary wlm, applenv = payroll , q"})
    assert result["command"] == "VARY WLM,APPLENV=PAYROLL,QUIESCE"
    assert (result["application_environment"], result["dynamic"]) == ("PAYROLL", False)
    assert (result["previous_state"], result["state"], result["changed_by"]) == ("AVAILABLE", "QUIESCING", "admin")
    after = await shown(client)
    assert after["state"] == "QUIESCING" and after["reason"] == "VARY WLM,APPLENV=PAYROLL,QUIESCE" and after["changed_by"] == "admin"
    assert after["changed_at"] == result["changed_at"]


async def test_resume_from_quiesced_once_the_servers_drained(client, app):
    await install_policy(client)
    await send(client, QUIESCE)
    early = await send(client, RESUME, expect=409)
    assert early["error"]["code"] == "wrong_state" and early["error"]["state"] == "QUIESCING"
    assert early["error"]["valid_states"] == ["QUIESCED", "STOPPED"]
    assert await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED, "no server left") == AEState.QUIESCED
    drained = await shown(client)
    assert drained["state"] == "QUIESCED" and drained["changed_by"] == "wlm" and drained["reason"] == "servers_drained: no server left"
    resumed = await send(client, RESUME)
    assert (resumed["previous_state"], resumed["state"]) == ("QUIESCED", "RESUMING")
    assert await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED) == AEState.AVAILABLE
    assert (await shown(client))["state"] == "AVAILABLE"


async def test_refresh_records_when_it_was_accepted(client, app):
    await install_policy(client)
    result = await send(client, {"action": "refresh", "application_environment": "payroll"})
    assert (result["command"], result["previous_state"], result["state"]) == ("VARY WLM,APPLENV=PAYROLL,REFRESH", "AVAILABLE", "REFRESHING")
    display = await shown(client)
    assert display["state"] == "REFRESHING" and display["refreshed_at"] == result["changed_at"]
    again = await send(client, {"command": "VARY WLM,APPLENV=PAYROLL,REFRESH"}, expect=409)
    assert again["error"]["code"] == "wrong_state" and again["error"]["state"] == "REFRESHING"
    await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED, "old servers replaced")
    after = await shown(client)
    assert after["state"] == "AVAILABLE" and after["refreshed_at"] == result["changed_at"]  # kept: it dates the servers


async def test_stopped_is_left_by_resume(client, app):
    await install_policy(client)
    assert await event(app, "PAYROLL", InternalEvent.UNEXPECTED_TERMINATIONS_EXCEEDED, "5 in 10 minutes") == AEState.STOPPED
    refused = await send(client, {"command": "VARY WLM,APPLENV=PAYROLL,REFRESH"}, expect=409)
    assert refused["error"]["state"] == "STOPPED"
    resumed = await send(client, {"action": "RESUME", "application_environment": "PAYROLL", "dynamic": False})
    assert (resumed["previous_state"], resumed["state"]) == ("STOPPED", "RESUMING")


async def test_an_event_that_does_not_matter_changes_and_audits_nothing(client, app):
    await install_policy(client)
    assert await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED, "late report") == AEState.AVAILABLE
    display = await shown(client)
    assert display["changed_at"] is None
    events = (await client.get("/v1/audit", headers=ADMIN, params={"action": "operator.event"})).json()
    assert events["total"] == 0


@pytest.mark.parametrize(
    ("command", "reason", "token", "column"),
    [
        ("VARY WLM,APPLENV=PAYROLL,STOP", "unknown_action", "STOP", 26),
        ("VARY WLM,APPLENV=PAY*,QUIESCE", "bad_name", "*", 21),
        ("VARY WLM,APPLENV=PAYROLL", "missing_action", "", 25),
        ("HALT WLM,APPLENV=PAYROLL,QUIESCE", "unknown_verb", "HALT", 1),
        ("", "empty", "", 1),
    ],
)
async def test_a_bad_command_says_why_and_where(client, command, reason, token, column):
    await install_policy(client)
    error = (await send(client, {"command": command}, expect=422))["error"]
    assert error["code"] == "validation_failed"
    [entry] = error["errors"]
    assert (entry["path"], entry["reason"], entry["token"], entry["column"]) == ("command", reason, token, column)
    assert (await commands(client))["total"] == 0  # not a command: nothing audited


@pytest.mark.parametrize(
    ("body", "status", "path"),
    [
        ({"action": "STOP", "application_environment": "PAYROLL"}, 422, "action"),
        ({"action": "QUIESCE", "application_environment": "PAY ROLL"}, 422, "application_environment"),
        ({"action": "QUIESCE"}, 422, "application_environment"),
        ({"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE", "dynamic": True}, 422, "dynamic"),
        ({"command": "V WLM,APPLENV=PAYROLL,Q " + "x" * 300}, 422, "command"),
        (["VARY WLM,APPLENV=PAYROLL,QUIESCE"], 422, "(root)"),
    ],
)
async def test_a_bad_body_names_the_field(client, body, status, path):
    await install_policy(client)
    error = (await send(client, body, expect=status))["error"]
    assert path in [entry["path"] for entry in error["errors"]], error


async def test_malformed_json_is_400(client):
    response = await client.post("/v1/operator/commands", headers={**ADMIN, "Content-Type": "application/json"}, content=b'{"command": ')
    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed_json"


async def test_unknown_and_dynamic_application_environments(client):
    no_policy = await send(client, QUIESCE, expect=404)
    assert no_policy["error"]["code"] == "no_policy"
    await install_policy(client)
    unknown = await send(client, {"command": "VARY WLM,APPLENV=NOSUCH,QUIESCE"}, expect=404)
    assert unknown["error"]["code"] == "unknown_application_environment" and unknown["error"]["application_environment"] == "NOSUCH"
    static = await send(client, {"command": "VARY WLM,DYNAPPL=PAYROLL,QUIESCE"}, expect=409)
    assert static["error"]["code"] == "not_dynamic" and "APPLENV=PAYROLL" in static["error"]["message"]
    dynamic = await send(client, {"action": "QUIESCE", "application_environment": "DYN1", "dynamic": True}, expect=404)
    assert dynamic["error"]["code"] == "unknown_application_environment"
    assert (await shown(client))["state"] == "AVAILABLE"


async def test_operators_and_admins_vary_viewers_only_look(client):
    await install_policy(client)
    viewer = await make_key(client, "watcher", ["viewer"])
    operator = await make_key(client, "console", ["operator"])
    refused = await send(client, QUIESCE, headers=viewer, expect=403)
    assert refused["error"]["code"] == "missing_role" and refused["error"]["required_roles"] == ["operator"]
    assert (await send(client, QUIESCE, headers=operator))["changed_by"] == "console"
    assert (await client.get("/v1/application-environments", headers=viewer)).status_code == 200
    assert (await client.get("/v1/operator/commands", headers=viewer)).json()["items"][0]["actor"] == "console"
    assert (await client.post("/v1/operator/commands", json=QUIESCE)).status_code == 401


async def test_concurrent_commands_only_one_passes_the_state_check(client, app):
    await install_policy(client)
    answers = await asyncio.gather(*(client.post("/v1/operator/commands", headers=ADMIN, json=QUIESCE) for _ in range(5)))
    assert sorted(answer.status_code for answer in answers) == [200, 409, 409, 409, 409]
    await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED)
    answers = await asyncio.gather(*(client.post("/v1/operator/commands", headers=ADMIN, json=RESUME) for _ in range(5)))
    assert sorted(answer.status_code for answer in answers) == [200, 409, 409, 409, 409]
    accepted = [item for item in (await commands(client))["items"] if item["result"] == "accepted"]
    assert [item["state"] for item in accepted] == ["RESUMING", "QUIESCING"]


# --------------------------------------------------------------------------------------------------------------------
# The audit trail of commands, and a restart
# --------------------------------------------------------------------------------------------------------------------


async def test_commands_accepted_and_refused_are_listed_newest_first(client, app):
    await install_policy(client)
    await send(client, QUIESCE)
    await send(client, QUIESCE, expect=409)
    await send(client, {"command": "VARY WLM,APPLENV=NOSUCH,RESUME"}, expect=404)
    await event(app, "PAYROLL", InternalEvent.SERVERS_DRAINED, "no server left")
    listed = await commands(client)
    assert listed["total"] == 3
    unknown, wrong_state, accepted = listed["items"]
    assert unknown["command"] == "VARY WLM,APPLENV=NOSUCH,RESUME" and unknown["application_environment"] == "NOSUCH"
    assert (unknown["result"], unknown["error"], unknown["state"]) == ("refused", "unknown_application_environment", None)
    assert (wrong_state["result"], wrong_state["error"], wrong_state["state"]) == ("refused", "wrong_state", "QUIESCING")
    assert "not valid while" in wrong_state["message"]
    assert accepted["command"] == "VARY WLM,APPLENV=PAYROLL,QUIESCE" and accepted["actor"] == "admin"
    assert (accepted["result"], accepted["previous_state"], accepted["state"]) == ("accepted", "AVAILABLE", "QUIESCING")
    page = await commands(client, limit=1, offset=1)
    assert [item["id"] for item in page["items"]] == [wrong_state["id"]] and page["total"] == 3
    events = (await client.get("/v1/audit", headers=ADMIN, params={"action": "operator.event"})).json()["items"]
    assert len(events) == 1 and events[0]["actor"] == "wlm" and events[0]["target"] == "PAYROLL"
    assert events[0]["detail"] == {
        "event": "servers_drained",
        "reason": "no server left",
        "result": "accepted",
        "previous_state": "QUIESCING",
        "state": "QUIESCED",
    }


async def test_states_and_commands_survive_a_restart(client, settings):
    await install_policy(client)
    await send(client, {"command": "VARY WLM,APPLENV=PAYROLL,REFRESH"})
    second = create_app(settings)
    async with (
        second.router.lifespan_context(second),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=second), base_url="http://wlm") as other,
    ):
        display = await shown(other)
        assert display["state"] == "REFRESHING" and display["refreshed_at"] is not None
        assert (await commands(other))["items"][0]["command"] == "VARY WLM,APPLENV=PAYROLL,REFRESH"
        refused = await send(other, {"command": "VARY WLM,APPLENV=PAYROLL,REFRESH"}, expect=409)
        assert refused["error"]["state"] == "REFRESHING"


# --------------------------------------------------------------------------------------------------------------------
# An environment that left the policy; the body's schema
# --------------------------------------------------------------------------------------------------------------------


async def test_an_environment_that_left_the_policy_is_deleting(client, app):
    await install_policy(client)
    await send(client, QUIESCE)
    await install_policy(client, without("PAYROLL2"), "application/json")
    listed = (await client.get("/v1/application-environments", headers=ADMIN)).json()["items"]
    states = [(item["name"], item["state"], item["in_policy"]) for item in listed]
    assert states == [("PAYROLL", "DELETING", False), ("PAYROLL2", "AVAILABLE", True)]
    gone = listed[0]
    assert gone["subsystem_type"] is None and gone["nodes"] == [] and gone["reason"] == "VARY WLM,APPLENV=PAYROLL,QUIESCE"
    refused = await send(client, RESUME, expect=404)
    assert refused["error"]["code"] == "unknown_application_environment"
    assert await event(app, "PAYROLL", InternalEvent.REMOVED_FROM_POLICY, "policy version 2") == AEState.DELETING
    assert (await shown(client))["reason"] == "removed_from_policy: policy version 2"


async def test_the_body_schema_is_in_the_openapi_document(client):
    spec = (await client.get("/openapi.json")).json()
    schema = spec["paths"]["/v1/operator/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert [variant["title"] for variant in schema["oneOf"]] == ["VaryCommandText", "VaryRequest"]
    assert schema["oneOf"][1]["properties"]["action"]["enum"] == ["QUIESCE", "RESUME", "REFRESH"]
    assert "$ref" not in json.dumps(schema)
