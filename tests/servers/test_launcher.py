"""The launcher on a real service process: it starts an environment's servers from its start command to the
decided count, they connect and serve, and a command that fails to start is not retried for 30 s."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import httpx
import pytest
import yaml

from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import ServiceProcess

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}


async def _eventually(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.2)


async def _service_with(tmp_path, start_command: list[str], server_limits: dict[str, int]) -> tuple[ServiceProcess, httpx.AsyncClient, str]:
    service = ServiceProcess(
        tmp_path, bootstrap_admin_key=ADMIN_KEY, log_level="info", launcher="true", goal_interval_seconds="0.5", lease_check_seconds="0.2"
    )
    service.start()
    http = httpx.AsyncClient(base_url=service.url, timeout=10)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0] |= {"start_command": start_command, "server_limits": server_limits}
    assert (await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))).status_code == 200
    await http.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"]})
    key = (await http.post("/v1/api-keys", headers=ADMIN, json={"principal": "qm"})).json()["key"]
    http.headers["Authorization"] = f"Bearer {key}"
    token = (await http.post("/v1/connections", json=QM)).json()["token"]
    return service, http, token


async def _active_servers(http: httpx.AsyncClient) -> int:
    listed = await http.get("/v1/connections", headers=ADMIN, params={"role": "server", "state": "active"})
    return len(listed.json()["items"])


async def test_the_servers_of_an_environment_are_started_to_its_minimum_and_serve(tmp_path):
    service, http, qm_token = await _service_with(tmp_path, [sys.executable, "-m", "app.examples.echo_server"], {"min": 2, "max": 4})
    try:
        assert await _eventually(lambda: _count_is(http, 2)), service.log_path.read_text()[-3000:]
        body = {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}, "payload": {"n": 7}}
        inserted = await http.post("/v1/work", json=body)
        assert inserted.status_code == 201
        logs = sorted((tmp_path / "data" / "servers").glob("PAYROLL-*.log"))
        assert len(logs) == 2  # one log per started server
        await asyncio.sleep(1.0)
        assert await _active_servers(http) == 2  # none started beyond the decision
    finally:
        await http.aclose()
        service.stop()
    # Stopping the service stops the servers it started.
    pids = [int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in service.log_path.read_text().splitlines() if "started server PAYROLL-" in line]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def _count_is(http: httpx.AsyncClient, count: int) -> bool:
    return await _active_servers(http) == count


async def test_a_start_command_that_fails_is_not_retried_within_30_seconds(tmp_path):
    service, http, _ = await _service_with(tmp_path, [sys.executable, "-c", "raise SystemExit(3)"], {"min": 1, "max": 2})
    try:
        logs = tmp_path / "data" / "servers"
        assert await _eventually(lambda: _logs_at_least(logs, 1), timeout=30)
        await asyncio.sleep(4.0)  # many launcher passes
        assert len(list(logs.glob("PAYROLL-*.log"))) == 1
        assert "failed to start (exit 3)" in service.log_path.read_text()
    finally:
        await http.aclose()
        service.stop()


async def _logs_at_least(directory, count: int) -> bool:
    return len(list(directory.glob("PAYROLL-*.log"))) >= count if directory.exists() else False
