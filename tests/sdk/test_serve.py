"""A whole lifecycle with the SDK against a real `wlm serve`, over a socket: a queue manager queues (one by one, as a
batch) and deletes, a server connects, selects and begins, runs its handler and ends each request, disconnects."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from wlm_client import QueueManager, Server

from tests.processes import ServiceProcess
from tests.sdk.recording import RecordingTransport

ROOT = Path(__file__).resolve().parent.parent.parent
ONLINE = {"userid": "ATM01"}
TIMEOUT = 30  # for the whole serve: a bug fails the test instead of hanging the suite


def _key(service: ServiceProcess, principal: str, *options: str) -> str:
    created = service.wlm("keys", "create", "--principal", principal, *options)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


@pytest.mark.asyncio
async def test_a_request_goes_from_insert_to_end_through_the_sdk(service):
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    qm_key = _key(service, "sdk-qm", "--role", "queue_manager")
    server_key = _key(service, "sdk-srv", "--role", "server", "--permit", "CB.*.PAYROLL")

    # The queue manager stays connected while the server works: its disconnect purges what it still has queued.
    async with await QueueManager.connect(service.url, qm_key, "CB", "BANK1") as qm:
        single = [await qm.insert("PAYROLL", {"n": n}, classification=ONLINE, idempotency_key=f"sdk-{n}") for n in range(2)]
        batch = await qm.insert_batch("PAYROLL", [{"classification": ONLINE, "payload": {"n": n}} for n in (2, 3)])
        withdrawn = await qm.insert("PAYROLL", {"n": "withdrawn"}, classification=ONLINE)
        await qm.delete(withdrawn["token"])
        tokens = [item["token"] for item in single + batch]

        handled: list[Any] = []
        stop = asyncio.Event()

        async def handler(item: dict[str, Any]) -> dict[str, Any]:
            assert item["state"] == "begun" and item["service_class"] == "ONLINE"
            handled.append(item["payload"]["n"])
            if len(handled) == len(tokens):
                stop.set()
            return {"double": item["payload"]["n"] * 2}

        transport = RecordingTransport(httpx.AsyncHTTPTransport())
        server = await Server.connect(service.url, server_key, "CB", "BANK1", "PAYROLL", transport=transport)
        await asyncio.wait_for(server.serve(handler, stop_event=stop), TIMEOUT)
        await _nothing_left(service, server_key)  # a server connects only beside a connected queue manager

    assert sorted(handled) == [0, 1, 2, 3]
    assert transport.ends() == dict.fromkeys(tokens, "completed")
    # Every call the server made was answered without an error: select (with begin and the ends), end, disconnect.
    assert [(sent.method, sent.path) for sent in transport.sent if sent.status is None or sent.status >= 400] == []
    assert ("DELETE", f"/v1/connections/{server.token}") in [(sent.method, sent.path) for sent in transport.sent]


async def _nothing_left(service: ServiceProcess, server_key: str) -> None:
    """Nothing is queued for PAYROLL: what was inserted was ended, the withdrawn request deleted."""
    body = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "PAYROLL"}
    async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {server_key}"}) as http:
        connected = await http.post("/v1/connections", json=body)
        assert connected.status_code == 201, connected.text
        token = connected.json()["token"]
        selected = await http.post("/v1/work/select", json={"connect_token": token, "wait_seconds": 0, "max_items": 10})
        assert selected.status_code == 204, selected.text
        await http.delete(f"/v1/connections/{token}")


def test_the_sdk_readme_s_example_runs_as_written(service, tmp_path):
    """The example a newcomer copies first, from sdk/python/README.md, against the service: its keys and URL given."""
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    readme = (ROOT / "sdk" / "python" / "README.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    keys = {"QM_KEY": _key(service, "readme-qm", "--role", "queue_manager")}
    keys["SERVER_KEY"] = _key(service, "readme-srv", "--role", "server", "--permit", "CB.*.PAYROLL")
    script = tmp_path / "example.py"
    prelude = "".join(f"{name} = {value!r}\n" for name, value in keys.items())
    script.write_text(prelude + example.replace("http://127.0.0.1:8000", service.url))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"queued \S+\nserved\n", result.stdout), result.stdout
