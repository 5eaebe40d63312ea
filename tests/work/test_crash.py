"""kill -9 while work flows: every accepted request ends exactly once, none lost, none twice.

Real processes: the service (`wlm serve`, embedded Redis with AOF, SQLite) and two echo servers
(`python -m app.examples.echo_server`, the SDK's server loop). A producer inserts 10,000 requests in batches of 50,
retrying a batch after a failure with the same idempotency keys, as a queue manager must. Midway the service is killed with
SIGKILL and started again on the same data; later one echo server is killed with SIGKILL and replaced."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict

import httpx
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import ServiceProcess
from tests.waiting import eventually

# Minutes, not seconds: 10,000 requests through real processes on a 2-core machine, with two crashes.
pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(900)]
TOTAL = 10_000
PRODUCERS = 4
BATCH = 50
PRODUCING_S = 480


def _echo_server(service: ServiceProcess, key: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "WLM_URL": service.url,
        "WLM_API_KEY": key,
        "WLM_SUBSYSTEM_TYPE": "CB",
        "WLM_SUBSYSTEM_NAME": "BANK1",
        "WLM_APPLICATION_ENVIRONMENT": "PAYROLL",
        "WLM_WORKER_TASKS": "8",
    }
    log = (service.dir / f"echo-{len(list(service.dir.glob('echo-*')))}.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "app.examples.echo_server"], env=env, stdout=log, stderr=subprocess.STDOUT)


def _raw_records(service: ServiceProcess) -> dict[str, list[tuple[str, object]]]:
    """Every row of every Parquet file, duplicates kept: token -> [(outcome, ended_at)]."""
    rows: dict[str, list[tuple[str, object]]] = defaultdict(list)
    for path in (service.dir / "data" / "records").glob("date=*/*.parquet"):
        for row in pq.read_table(path, columns=["token", "outcome", "ended_at"]).to_pylist():
            rows[row["token"]].append((row["outcome"], row["ended_at"]))
    return rows


async def test_kill_9_of_the_service_and_of_a_server_loses_and_repeats_nothing(tmp_path):
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY, log_level="warning")
    service.start()
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0] |= {"completion_time_ms": 2000, "backlog_limit": 1_000_000, "start_command": None}
    servers: list[subprocess.Popen[bytes]] = []
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
            assert (
                await http.put("/v1/policy", headers={**admin, "Content-Type": "application/json"}, content=json.dumps(document))
            ).status_code == 200
            keys = {}
            for name, roles, permits in (("qm", ["queue_manager"], []), ("srv", ["server"], ["CB.**"])):
                await http.post("/v1/principals", headers=admin, json={"name": name, "roles": roles, "permits": permits})
                keys[name] = (await http.post("/v1/api-keys", headers=admin, json={"principal": name})).json()["key"]
            qm = {"Authorization": f"Bearer {keys['qm']}"}
            qm_token = (
                await http.post(
                    "/v1/connections", headers=qm, json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
                )
            ).json()["token"]
            servers += [_echo_server(service, keys["srv"]) for _ in range(2)]

            accepted: dict[int, str] = {}
            next_index = 0
            service_killed = server_killed = False

            async def produce() -> None:
                nonlocal next_index
                while next_index < TOTAL:
                    first, next_index = next_index, min(next_index + BATCH, TOTAL)
                    indexes = range(first, next_index)
                    items = [{"classification": {"userid": "ATM01"}, "payload": {"i": i}, "idempotency_key": f"req-{i}"} for i in indexes]
                    body = {"connect_token": qm_token, "application_environment": "PAYROLL", "items": items}
                    while True:  # a queue manager retries with the same idempotency keys until it gets an answer
                        try:
                            response = await http.post("/v1/work:batch", headers=qm, json=body)
                            if response.status_code == 201:
                                accepted.update(zip(indexes, (item["token"] for item in response.json()["items"]), strict=True))
                                break
                            assert response.status_code >= 500, response.text
                        except httpx.TransportError:
                            pass
                        await asyncio.sleep(0.2)  # the queue manager's pause before it retries

            async def chaos() -> None:
                nonlocal service_killed, server_killed
                await eventually(lambda: len(accepted) >= TOTAL * 0.3, PRODUCING_S, what="30% of the requests accepted")
                service.kill()
                service_killed = True
                await asyncio.to_thread(service.start)
                await eventually(lambda: len(accepted) >= TOTAL * 0.6, PRODUCING_S, what="60% of the requests accepted")
                servers[0].send_signal(signal.SIGKILL)
                servers[0].wait()
                server_killed = True
                servers.append(_echo_server(service, keys["srv"]))

            await asyncio.wait_for(asyncio.gather(chaos(), *(produce() for _ in range(PRODUCERS))), PRODUCING_S)
            assert service_killed and server_killed and len(accepted) == TOTAL
            tokens = set(accepted.values())
            assert len(tokens) == TOTAL  # no insert was queued twice by its retries

            rows = await eventually(
                lambda: tokens <= set(found := _raw_records(service)) and found,
                300,
                what=lambda: f"{len(tokens - set(_raw_records(service)))} accepted requests never ended",
                interval=1,
            )
            assert set(rows) == tokens  # nothing ended that was not accepted
            for token, ends in rows.items():
                # A record batch written just before a crash may be written again (at least once): the copies
                # are identical. Two different ends of one request would be a second delivery's second end.
                assert len(set(ends)) == 1, (token, ends)
                assert ends[0][0] == "completed", (token, ends)
    finally:
        for process in servers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in servers:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        if service.process is not None and service.process.poll() is None:
            service.stop()
