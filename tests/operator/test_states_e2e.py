"""QUIESCE, RESUME, REFRESH and STOPPED end to end: a real service process whose launcher starts real server
processes (the echo server), and work flowing through every change; no queued request is lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import httpx
import pytest
import yaml

from app.work import records
from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import ServiceProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(240)]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ECHO = [sys.executable, "-m", "app.examples.echo_server"]
# Long enough for many launcher passes even on a loaded machine: a wrong start would show within it.
NOTHING_HAPPENS_S = 3.0


class Rig:
    def __init__(self, service: ServiceProcess, http: httpx.AsyncClient, qm: dict[str, str], qm_token: str) -> None:
        self.service, self.http, self.qm, self.qm_token = service, http, qm, qm_token
        self.accepted: list[str] = []

    async def insert(self, count: int, delay_ms: int = 0) -> None:
        for _ in range(count):
            body = {
                "connect_token": self.qm_token,
                "application_environment": "PAYROLL",
                "classification": {"userid": "ATM01"},
                "payload": {"delay_ms": delay_ms},
            }
            answer = await self.http.post("/v1/work", headers=self.qm, json=body)
            assert answer.status_code == 201, answer.text
            self.accepted.append(answer.json()["token"])

    async def vary(self, action: str, expect: int = 200) -> dict:
        answer = await self.http.post("/v1/operator/commands", headers=ADMIN, json={"command": f"VARY WLM,APPLENV=PAYROLL,{action}"})
        assert answer.status_code == expect, answer.text
        return answer.json()

    async def display(self) -> dict:
        return (await self.http.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()

    async def servers(self) -> list[int]:
        listed = await self.http.get("/v1/connections", headers=ADMIN, params={"role": "server", "state": "active"})
        return sorted(item["id"] for item in listed.json()["items"])

    async def until(self, check, timeout: float = 60.0, what: str = "") -> None:
        await eventually(check, timeout, what=lambda: f"{what}:\n{self.service.log_path.read_text()[-3000:]}", interval=0.2)

    async def state_is(self, state: str) -> bool:
        return (await self.display())["state"] == state

    def ended(self) -> dict[str, str]:
        return {row["token"]: row["outcome"] for row in records.read(self.service.dir / "data" / "records").to_pylist()}

    async def all_accepted_completed(self) -> bool:
        ended = self.ended()
        return all(ended.get(token) == "completed" for token in self.accepted)


@pytest.fixture
async def rig(tmp_path):
    service = ServiceProcess(
        tmp_path,
        bootstrap_admin_key=ADMIN_KEY,
        log_level="info",
        launcher="true",
        goal_interval_seconds="0.5",
        lease_check_seconds="0.2",
        heartbeat_timeout_seconds="2",
        records_flush_seconds="0.3",
    )
    service.start()
    http = httpx.AsyncClient(base_url=service.url, timeout=10)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0] |= {"start_command": ECHO, "server_limits": {"min": 2, "max": 4}}
    assert (
        await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))
    ).status_code == 200
    await http.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"]})
    qm = {"Authorization": f"Bearer {(await http.post('/v1/api-keys', headers=ADMIN, json={'principal': 'qm'})).json()['key']}"}
    token = (
        await http.post("/v1/connections", headers=qm, json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"})
    ).json()["token"]
    rig = Rig(service, http, qm, token)
    await rig.until(lambda: _count(rig, 2), what="two launched servers")
    yield rig
    await http.aclose()
    service.stop()


async def _count(rig: Rig, count: int) -> bool:
    return len(await rig.servers()) == count


async def test_quiesce_drains_the_servers_keeps_queueing_and_resume_serves_what_waited(rig):
    await rig.insert(5)
    await rig.until(rig.all_accepted_completed, what="the first requests")
    accepted = await rig.vary("QUIESCE")
    assert (accepted["previous_state"], accepted["state"]) == ("AVAILABLE", "QUIESCING")
    await rig.until(lambda: rig.state_is("QUIESCED"), what="QUIESCED")
    assert await rig.servers() == []  # they ended what they held and disconnected
    await rig.insert(10)  # still accepted, and queued
    # Nothing must happen: no server starts while quiesced, over many launcher passes (every 0.2 s) and goal decisions.
    await asyncio.sleep(NOTHING_HAPPENS_S)
    assert await rig.servers() == []
    assert (await rig.display())["queued_total"] == 10
    refused = await rig.vary("REFRESH", expect=409)
    assert refused["error"]["state"] == "QUIESCED"
    await rig.vary("RESUME")
    await rig.until(lambda: rig.state_is("AVAILABLE"), what="AVAILABLE after RESUME")
    await rig.until(rig.all_accepted_completed, what="the requests queued while quiesced")
    assert len(rig.ended()) == len(rig.accepted) == 15  # each ended once


async def test_refresh_replaces_every_server_and_loses_nothing(rig):
    before = await rig.servers()
    await rig.insert(10, delay_ms=100)
    await rig.vary("REFRESH")
    await rig.until(lambda: rig.state_is("AVAILABLE"), what="AVAILABLE after REFRESH")
    await rig.until(lambda: _replaced(rig, before), what="replacement servers")
    await rig.insert(5)
    await rig.until(rig.all_accepted_completed, what="every request")
    assert len(rig.ended()) == 15


async def _replaced(rig: Rig, before: list[int]) -> bool:
    now = await rig.servers()
    return len(now) == 2 and not set(now) & set(before)


async def test_five_unexpected_terminations_stop_the_environment_until_resume(rig):
    log = rig.service.log_path
    for _ in range(5):
        pids = [int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in log.read_text().splitlines() if "started server PAYROLL-" in line]
        killed = pids[-1]
        os.kill(killed, signal.SIGKILL)  # dies without IWM4DIS: found by its silence
        await rig.until(lambda killed=killed: _state_or_started_after(rig, killed), timeout=30, what="the death noticed")
        if (await rig.display())["state"] == "STOPPED":
            break
    await rig.until(lambda: rig.state_is("STOPPED"), timeout=30, what="STOPPED")
    started = log.read_text().count("started server PAYROLL-")
    # The server that was never killed keeps working while STOPPED; the killed one is not replaced.
    await rig.insert(3)
    await rig.until(rig.all_accepted_completed, what="the survivor serving while STOPPED")
    await asyncio.sleep(NOTHING_HAPPENS_S)  # nothing must happen: no launcher pass replaces the killed server
    assert log.read_text().count("started server PAYROLL-") == started
    assert len(await rig.servers()) == 1
    await rig.vary("RESUME")
    await rig.until(lambda: rig.state_is("AVAILABLE"), what="AVAILABLE after RESUME")
    await rig.until(lambda: _count(rig, 2), what="servers started again after RESUME")


async def _state_or_started_after(rig: Rig, killed: int) -> bool:
    if (await rig.display())["state"] == "STOPPED":
        return True
    pids = [
        int(line.rsplit("pid ", 1)[1].rstrip(")"))
        for line in rig.service.log_path.read_text().splitlines()
        if "started server PAYROLL-" in line
    ]
    return pids[-1] != killed and len(await rig.servers()) == 2
