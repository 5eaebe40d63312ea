"""A stop signal ends `wlm serve` cleanly: Ctrl-C in its terminal (SIGINT to its whole process group) or SIGTERM to
the service alone (docker stop, systemd). A waiting select is answered, the duties stop and write the records of
work ended since their last flush, the scheduler role is resigned, and the embedded Redis stops last with the queued
work in its AOF. No traceback, no error line, exit code 0."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
import yaml
from redis.asyncio import Redis

from app.queues.keys import AeKeys
from tests.conftest import ADMIN, ADMIN_KEY, EXAMPLE_POLICY, make_key
from tests.processes import ServiceProcess, processes_of
from tests.waiting import eventually, eventually_sync
from tests.work.conftest import make_world

pytestmark = pytest.mark.asyncio

STOPS = {"interrupt": ServiceProcess.interrupt, "terminate": lambda service: service.process.send_signal(signal.SIGTERM)}


def _policy_with_ledger() -> str:
    """The example policy and a second environment, LEDGER, where a server waits while PAYROLL holds work."""
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"].append({**document["application_environments"][0], "name": "LEDGER"})
    return json.dumps(document)


async def _waiting_ledger_select(http: httpx.AsyncClient, service: ServiceProcess) -> asyncio.Task[httpx.Response]:
    """A LEDGER server's long poll, returned once it waits in the service: its select script has marked the server
    seen (the mark is removed first, so it is this select's)."""
    key = await make_key(http, "ledger", ["server"], ["CB.*.LEDGER"])
    body = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "LEDGER"}
    connected = (await http.post("/v1/connections", headers=key, json=body)).json()
    seen = AeKeys("wlm", connected["node"], "LEDGER").seen
    port = (service.dir / "data" / "redis" / "redis.port").read_text()
    async with Redis(port=int(port)) as redis:
        await redis.hdel(seen, str(connected["id"]))
        long_poll = {"connect_token": connected["token"], "wait_seconds": 30}
        poll = asyncio.create_task(http.post("/v1/work/select", headers=key, json=long_poll))

        async def marked() -> bool:
            assert not poll.done(), poll.result().text
            return bool(await redis.hexists(seen, str(connected["id"])))

        await eventually(marked, 10, what="the LEDGER select waiting in the service")
    return poll


def _recorded_tokens(data: Path) -> set[str]:
    return {token for path in (data / "records").rglob("*.parquet") for token in pq.read_table(path).column("token").to_pylist()}


@pytest.mark.parametrize("stop", sorted(STOPS))
async def test_a_stop_signal_ends_the_service_cleanly_and_keeps_its_work(tmp_path, stop):
    # Records are flushed when the duties start and then not for an hour: only the stop can write the one ended here.
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY, records_flush_seconds="3600")
    service.start(own_session=True)
    data = tmp_path / "data"
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
            world = await make_world(http, _policy_with_ledger())
            for n in range(4):
                await world.insert({"n": n})
            server = await world.server()
            ended = (await world.select(server)).json()["items"][0]["token"]
            await world.end(server, ended)
            await world.select(server)  # held: selected, not ended
            waiting = await _waiting_ledger_select(http, service)
            STOPS[stop](service)
            assert (await asyncio.wait_for(waiting, 10)).status_code == 204
            assert await asyncio.to_thread(service.process.wait, 30) == 0
    finally:
        service.kill()

    log = service.log_path.read_text()
    assert "Traceback" not in log and not [line for line in log.splitlines() if "ERROR:" in line or " ERROR" in line], log
    assert "no longer the scheduler" in log and "could not resign" not in log, log
    # The embedded Redis and the records writer are gone; one may still be on its way out when the service's own
    # exit is seen (seen once, on a loaded machine with the suite on two workers).
    eventually_sync(lambda: processes_of(str(data)) == [], 10, what="the service's children gone")
    assert ended in _recorded_tokens(data)

    again = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY)
    again.start()
    try:
        async with httpx.AsyncClient(base_url=again.url, timeout=60) as http:
            response = await http.get("/v1/application-environments", headers=ADMIN, params={"name": "PAYROLL"})
        (payroll,) = response.json()["items"]
        assert (payroll["queued_total"], payroll["in_flight"]) == (2, 1)
    finally:
        again.kill()
