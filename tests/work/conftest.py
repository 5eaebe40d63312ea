"""A queue manager and servers connected to the example policy, on the real app, Redis and database."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import EXAMPLE_POLICY, install_policy, make_key
from tests.waiting import eventually

QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
ONLINE = {"userid": "ATM01"}  # classifies to ONLINE (importance 1)
BATCH = {"userid": "BOB"}  # the default: BATCH (importance 3)


def policy_document(**ae_changes: Any) -> str:
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0].update(ae_changes)
    return json.dumps(document)


def grouped_policy(groups: list[dict[str, Any]], **class_groups: str) -> str:
    """The example policy with `groups` as its resource groups, and each class named given its group."""
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["resource_groups"] = groups
    for service_class in document["service_classes"]:
        if service_class["name"] in class_groups:
            service_class["resource_group"] = class_groups[service_class["name"]]
    return json.dumps(document)


@dataclass
class World:
    client: httpx.AsyncClient
    qm: dict[str, str]
    qm_token: str
    server_key: dict[str, str]
    exit_secret: str | None = None

    async def server(self, tasks: int = 1, weight: int = 1, overflow: bool = False) -> str:
        body = {
            "role": "server",
            "subsystem_type": "CB",
            "subsystem_name": "BANK1",
            "application_environment": "PAYROLL",
            "worker_tasks": tasks,
            "worker_weight": weight,
            "overflow": overflow,
        }
        response = await self.client.post("/v1/connections", headers=self.server_key, json=body)
        assert response.status_code == 201, response.text
        return response.json()["token"]  # type: ignore[no-any-return]

    async def insert(
        self, payload: Any = None, classification: dict[str, str] | None = None, expect: int = 201, **extra: Any
    ) -> dict[str, Any]:
        body = {"connect_token": self.qm_token, "application_environment": "PAYROLL", "payload": payload, **extra}
        if "enclave_token" not in extra:
            body["classification"] = classification if classification is not None else ONLINE
        response = await self.client.post("/v1/work", headers=self.qm, json=body)
        assert response.status_code == expect, response.text
        return response.json()  # type: ignore[no-any-return]

    async def insert_until_accepted(self, payload: Any = None, **extra: Any) -> dict[str, Any]:
        """An insert answered 201, sent again (with the same idempotency key, if any) while it is answered 503: as a
        queue manager does while the service waits for Redis or its replica."""
        body = {"connect_token": self.qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": payload, **extra}
        answers: list[httpx.Response] = []

        async def accepted() -> bool:
            answers.append(await self.client.post("/v1/work", headers=self.qm, json=body))
            assert answers[-1].status_code in (201, 503), answers[-1].text
            return answers[-1].status_code == 201

        await eventually(accepted, 30, what="an insert answered 201", interval=0.2)
        return answers[-1].json()  # type: ignore[no-any-return]

    async def select(self, token: str, expect: int | None = 200, **extra: Any) -> httpx.Response:
        response = await self.client.post("/v1/work/select", headers=self.server_key, json={"connect_token": token, **extra})
        if expect is not None:
            assert response.status_code == expect, response.text
        return response

    async def end(self, server: str, token: str, outcome: str = "completed", expect: int = 200, **extra: Any) -> httpx.Response:
        response = await self.client.post(
            f"/v1/work/{token}/end", headers=self.server_key, json={"connect_token": server, "outcome": outcome, **extra}
        )
        assert response.status_code == expect, response.text
        return response


async def make_world(client: httpx.AsyncClient, document: str | None = None, exit_url: str | None = None) -> World:
    await install_policy(client, document or policy_document(), "application/json")
    qm = await make_key(client, "qm", ["queue_manager"])
    server_key = await make_key(client, "srv", ["server"], ["CB.*.PAYROLL"])
    response = await client.post("/v1/connections", headers=qm, json={**QM, **({"exit_url": exit_url} if exit_url else {})})
    assert response.status_code == 201, response.text
    return World(client, qm, response.json()["token"], server_key, response.json()["exit_secret"])


@pytest.fixture
async def world(client: httpx.AsyncClient) -> World:
    return await make_world(client)
