"""The SDK (sdk/python) on the real app (through httpx.ASGITransport), real Redis and the database."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from wlm_client import DeadLetter, QueueManager, Server, WlmError

from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key
from tests.sdk.recording import RecordingTransport

pytestmark = pytest.mark.asyncio

URL = "http://wlm"
ONLINE = {"userid": "ATM01"}
TIMEOUT = 8  # no test waits longer for the SDK: a bug fails the test instead of hanging the suite


@dataclass
class Setup:
    client: httpx.AsyncClient
    app: FastAPI
    qm_key: str
    server_key: str

    async def queue_manager(self) -> QueueManager:
        return await QueueManager.connect(URL, self.qm_key, "CB", "BANK1", transport=httpx.ASGITransport(app=self.app))

    async def server(self, worker_tasks: int = 1, transport: httpx.AsyncBaseTransport | None = None) -> Server:
        return await Server.connect(
            URL,
            self.server_key,
            "CB",
            "BANK1",
            "PAYROLL",
            worker_tasks=worker_tasks,
            transport=transport or httpx.ASGITransport(app=self.app),
        )

    async def nothing_left(self) -> None:
        """Nothing queued, and nothing held by a departed server (that would have been given back)."""
        headers = {"Authorization": f"Bearer {self.server_key}"}
        body = {
            "role": "server",
            "subsystem_type": "CB",
            "subsystem_name": "BANK1",
            "application_environment": "PAYROLL",
            "worker_tasks": 100,
        }
        token = (await self.client.post("/v1/connections", headers=headers, json=body)).json()["token"]
        selected = await self.client.post(
            "/v1/work/select", headers=headers, json={"connect_token": token, "wait_seconds": 0, "max_items": 100}
        )
        assert selected.status_code == 204, selected.text
        await self.client.delete(f"/v1/connections/{token}", headers=headers)

    async def server_states(self) -> list[str]:
        listed = await self.client.get("/v1/connections", headers=ADMIN, params={"role": "server"})
        return [item["state"] for item in listed.json()["items"]]


def _key(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture
async def setup(client: httpx.AsyncClient, app: FastAPI) -> Setup:
    await install_policy(client)
    qm = await make_key(client, "qm", ["queue_manager"])
    server = await make_key(client, "srv", ["server"], ["CB.*.PAYROLL"])
    return Setup(client, app, _key(qm), _key(server))


async def test_four_workers_handle_each_request_once(setup):
    async with await setup.queue_manager() as qm:
        tokens = [(await qm.insert("PAYROLL", {"n": n}, classification=ONLINE))["token"] for n in range(50)]
        assert len(set(tokens)) == 50
        seen: Counter[int] = Counter()
        running = 0
        most_running = 0
        stop = asyncio.Event()

        async def handler(item: dict[str, Any]) -> dict[str, Any]:
            nonlocal running, most_running
            assert item["state"] == "begun" and item["service_class"] == "ONLINE"
            running += 1
            most_running = max(most_running, running)
            await asyncio.sleep(0.005)  # the handler's work, overlapping the other workers'
            running -= 1
            seen[item["payload"]["n"]] += 1
            if sum(seen.values()) == 50:
                stop.set()
            return {"double": item["payload"]["n"] * 2}

        transport = RecordingTransport(httpx.ASGITransport(app=setup.app))
        server = await setup.server(worker_tasks=4, transport=transport)
        await asyncio.wait_for(server.serve(handler, stop_event=stop), TIMEOUT)

        assert seen == Counter(range(50))
        assert 1 < most_running <= 4
        assert transport.ends() == dict.fromkeys(tokens, "completed")
        assert await setup.server_states() == ["disconnected"]
        await setup.nothing_left()


async def test_a_failing_handler_ends_its_request_as_failed(setup):
    async with await setup.queue_manager() as qm:
        good = await qm.insert("PAYROLL", {"fail": None}, classification=ONLINE)
        bad = await qm.insert("PAYROLL", {"fail": "boom"}, classification=ONLINE)
        dead = await qm.insert("PAYROLL", {"fail": "dead"}, classification=ONLINE)
        stop = asyncio.Event()
        handled = []

        async def handler(item: dict[str, Any]) -> None:
            handled.append(item["token"])
            if len(handled) == 3:
                stop.set()
            if item["payload"]["fail"] == "boom":
                raise RuntimeError("boom")
            if item["payload"]["fail"] == "dead":
                raise DeadLetter("no such account")

        transport = RecordingTransport(httpx.ASGITransport(app=setup.app))
        server = await setup.server(transport=transport)
        await asyncio.wait_for(server.serve(handler, wait_seconds=1, stop_event=stop), TIMEOUT)

        assert handled == [good["token"], bad["token"], dead["token"]]
        assert transport.ends() == {good["token"]: "completed", bad["token"]: "failed", dead["token"]: "failed"}
        await setup.nothing_left()
        # Only the one raised as a DeadLetter is kept, with its error text.
        kept = (await setup.client.get("/v1/dead-letters", headers=ADMIN)).json()["items"]
        assert [(d["token"], d["error"]) for d in kept] == [(dead["token"], "DeadLetter: no such account")]


async def test_serve_reconnects_when_its_connection_is_closed_while_waiting(setup):
    async with await setup.queue_manager() as qm:
        server = await setup.server()
        old_token = server.token
        stop = asyncio.Event()
        handled: list[Any] = []

        async def handler(item: dict[str, Any]) -> None:
            handled.append(item["payload"])
            stop.set()

        serving = asyncio.create_task(asyncio.wait_for(server.serve(handler, wait_seconds=0.5, stop_event=stop), TIMEOUT))
        await asyncio.sleep(0.05)  # long polling now, or about to: either way the connection is gone when it asks
        forced = await setup.client.delete(f"/v1/connections/{old_token}", headers=ADMIN)
        assert forced.status_code == 200 and forced.json()["already_disconnected"] is False
        await qm.insert("PAYROLL", "after", classification=ONLINE)
        await serving

        assert handled == ["after"] and server.token != old_token
        assert await setup.server_states() == ["disconnected", "disconnected"]
        await setup.nothing_left()


async def test_work_held_by_a_closed_connection_comes_again_after_the_reconnect(setup):
    async with await setup.queue_manager() as qm:
        for n in (1, 2):
            await qm.insert("PAYROLL", n, classification=ONLINE)
        server = await setup.server()
        stop = asyncio.Event()
        handled: list[tuple[int, int]] = []

        async def handler(item: dict[str, Any]) -> None:
            handled.append((item["payload"], item["deliveries"]))
            if len(handled) == 1:  # the connection closes under the request: it goes back to the front
                forced = await setup.client.delete(f"/v1/connections/{server.token}", headers=ADMIN)
                assert forced.json()["requeued"] == 1
            if len(handled) == 3:
                stop.set()

        await asyncio.wait_for(server.serve(handler, wait_seconds=0.5, stop_event=stop), TIMEOUT)
        assert handled == [(1, 1), (1, 2), (2, 1)]  # at least once: its end with the old connection was refused
        await setup.nothing_left()


async def test_terminate_stops_serving_and_disconnects(setup):
    async with await setup.queue_manager():
        server = await setup.server(worker_tasks=2)
        document = yaml.safe_load(EXAMPLE_POLICY)
        document["application_environments"][0]["name"] = "OTHERAPP"
        await install_policy(setup.client, json.dumps(document), "application/json")

        async def handler(item: dict[str, Any]) -> None:
            raise AssertionError("no work expected")

        await asyncio.wait_for(server.serve(handler, wait_seconds=1), TIMEOUT)  # no stop event: terminate stops it
        assert await setup.server_states() == ["disconnected"]


async def test_idempotent_insert_returns_the_same_request(setup):
    async with await setup.queue_manager() as qm:
        first = await qm.insert("PAYROLL", {"order": 42}, classification=ONLINE, idempotency_key="order-42")
        again = await qm.insert("PAYROLL", {"order": 42}, classification=ONLINE, idempotency_key="order-42")
        other = await qm.insert("PAYROLL", {"order": 43}, classification=ONLINE, idempotency_key="order-43")
        assert first == again and other["token"] != first["token"]
        assert first["service_class"] == "ONLINE" and first["application_environment"] == "PAYROLL"


async def test_enclave_batch_and_delete(setup):
    async with await setup.queue_manager() as qm:
        enclave = await qm.enclave({"transaction_class": "RPT1"})
        assert enclave["service_class"] == "REPORTS"
        items = await qm.insert_batch("PAYROLL", [{"enclave_token": enclave["token"], "payload": n} for n in range(3)])
        assert [item["service_class"] for item in items] == ["REPORTS"] * 3
        for item in items:
            await qm.delete(item["token"])
        with pytest.raises(WlmError) as deleted_twice:
            await qm.delete(items[0]["token"])
        assert deleted_twice.value.status == 409
        await setup.nothing_left()


async def test_a_queue_manager_asks_how_its_request_is_doing(setup):
    async with await setup.queue_manager() as qm:
        first = await qm.insert("PAYROLL", {"n": 1}, classification=ONLINE)
        second = await qm.insert("PAYROLL", {"n": 2}, classification=ONLINE)
        status = await qm.status(second["token"])
        assert (status["state"], status["position"], status["delay_cause"], status["service_class"]) == ("queued", 1, "no_server", "ONLINE")
        await qm.delete(first["token"])
        assert (await qm.status(first["token"]))["state"] == "deleted"
        assert (await qm.status(second["token"]))["position"] == 0
        with pytest.raises(WlmError) as unknown:
            await qm.status("LOCAL~PAYROLL~never")
        assert (unknown.value.status, unknown.value.code) == (404, "unknown_work")


async def test_errors_carry_status_and_code(setup):
    async with await setup.queue_manager() as qm:
        with pytest.raises(WlmError) as unknown_ae:
            await qm.insert("NOSUCHAPP", {}, classification=ONLINE)
        error = unknown_ae.value
        assert (error.status, error.code) == (404, "unknown_application_environment")
        assert "NOSUCHAPP" in error.message and error.body["error"]["application_environment"] == "NOSUCHAPP"
    with pytest.raises(WlmError) as refused:
        await QueueManager.connect(URL, "wlm_not-a-key", "CB", "BANK1", transport=httpx.ASGITransport(app=setup.app))
    assert refused.value.status == 401


async def test_disconnect_is_idempotent_and_the_context_manager_disconnects(setup):
    qm = await setup.queue_manager()
    async with qm:
        pass
    await qm.disconnect()
    listed = await setup.client.get("/v1/connections", headers=ADMIN, params={"role": "queue_manager"})
    assert [item["state"] for item in listed.json()["items"]] == ["disconnected"]
