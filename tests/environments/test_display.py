"""D WLM,APPLENV=: the application environments' display over HTTP (GET /v1/application-environments and /{name}),
on the real app, Redis and databases."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.config import Settings
from tests.conftest import ADMIN, install_policy
from tests.work.conftest import BATCH, ONLINE, make_world

pytestmark = pytest.mark.asyncio


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """No background duties: the goal evaluation would fill in the performance these tests expect empty."""
    settings.background_duties = False
    return settings


async def shown(client: httpx.AsyncClient, name: str = "PAYROLL") -> dict[str, Any]:
    response = await client.get(f"/v1/application-environments/{name}", headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def command(client: httpx.AsyncClient, text: str) -> dict[str, Any]:
    """A DISPLAY typed at the console, which the operator commands answer as the display does."""
    response = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": text})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_display_counts_servers_in_flight_and_queued_work_by_class(client):
    world = await make_world(client)
    server = await world.server(tasks=2)
    await world.server()
    for classification in (ONLINE, ONLINE, ONLINE, BATCH):
        await world.insert(classification=classification)
    await world.select(server)  # takes one ONLINE request, the most important class
    display = await shown(client)
    assert (display["name"], display["state"], display["subsystem_type"], display["in_policy"]) == ("PAYROLL", "AVAILABLE", "CB", True)
    assert (display["servers"], display["in_flight"], display["queued_total"]) == (2, 1, 3)
    assert list(display["queued"].items()) == [("ONLINE", 2), ("BATCH", 1)]
    assert display["nodes"] == [{"node": "LOCAL", "servers": 2, "in_flight": 1, "queued": {"ONLINE": 2, "BATCH": 1}}]
    assert display["performance"] is None


async def test_display_patterns_and_the_display_command(client):
    await install_policy(client)
    everything = (await client.get("/v1/application-environments", headers=ADMIN)).json()
    assert everything["command"] == "DISPLAY WLM,APPLENV=*" and [item["name"] for item in everything["items"]] == ["PAYROLL"]
    matching = (await client.get("/v1/application-environments", headers=ADMIN, params={"name": "pay*"})).json()
    assert matching["command"] == "DISPLAY WLM,APPLENV=PAY*" and len(matching["items"]) == 1
    assert (await client.get("/v1/application-environments", headers=ADMIN, params={"name": "X*"})).json()["items"] == []
    bad = await client.get("/v1/application-environments", headers=ADMIN, params={"name": "PAY ROLL"})
    assert bad.status_code == 422
    typed = await command(client, "d wlm,applenv=P*")
    assert typed["command"] == "DISPLAY WLM,APPLENV=P*" and typed["items"] == matching["items"]
    assert (await command(client, "D WLM,DYNAPPL=*"))["items"] == []


async def test_an_environment_no_one_knows_is_a_404_and_the_list_is_empty_before_any_policy(client):
    assert (await client.get("/v1/application-environments", headers=ADMIN)).json()["items"] == []
    await install_policy(client)
    missing = await client.get("/v1/application-environments/NOSUCH", headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_application_environment"
    assert (await shown(client, "payroll"))["name"] == "PAYROLL"  # a name in any case
