"""Shared by the benchmarks: a trace (bench/_trace.py) run through the real service, as goal management runs it.

`wlm serve` (one worker, embedded Redis, SQLite) starts with its launcher on and every other setting at its default
(the manager's named in MANAGER). The policy has the trace's classes (goal, importance; each classified by its name
as userid) and one environment, SIMAPP, whose servers (`python -m app.examples.echo_server`, one task each, each
request sleeping the `delay_ms` of its payload) the launcher starts to the count the manager decides, within the
server limits given. The load goes in through one queue manager connection from the moment the minimum servers
are connected; the manager's decision (desired and connected servers) is read every 10 s. After the trace, every
accepted request is waited for until it has its work record (up to the drain time); each request's insert,
selection and end are its record's. The servers' lifetimes are watched as bench/_lifetimes.py watches any
server's, under the service's process (a benchmark may run two services at once).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop
from _http import HttpClient
from _lifetimes import Lifetime, Lifetimes
from _records import timed, without_record
from _service import ADMIN_KEY, Service
from _trace import Arrival, Trace

from app.config import Settings

SERVER_MARKER = "app.examples.echo_server"
MANAGER = {name: Settings.model_fields[name].default for name in ("goal_interval_seconds", "goal_window_seconds", "lease_check_seconds")}
DECISION_EVERY_S = 10.0
CONNECT_SECONDS = 90.0


@dataclass
class WlmRun:
    """One run: its trace's start (epoch), each request's (class, inserted, selected, ended) in epoch seconds, the
    servers' lifetimes, the manager's decisions seen (seconds after the start, desired, connected), the inserts
    accepted and refused (by status or exception), how many accepted have no record after the drain, and the stopped
    service's data directory (its records and database, for a job run on them afterwards)."""

    start: float
    requests: list[tuple[str, float, float, float]]
    lifetimes: list[Lifetime]
    decisions: list[tuple[float, int, int]]
    accepted: int
    refused: dict[str, int]
    unrecorded: int
    data_dir: Path | None = None


def policy(trace: Trace, low: int, high: int) -> dict[str, Any]:
    classes = list(trace.classes.values())
    return {
        "name": "PEERS",
        "service_classes": [{"name": c.name, "importance": c.importance, "goal": c.goal.as_policy()} for c in classes],
        "classification": [
            {
                "subsystem_type": "SIM",
                "default_service_class": classes[-1].name,
                "rules": [{"qualifier": "UI", "value": c.name, "service_class": c.name} for c in classes],
            }
        ],
        "application_environments": [
            {
                "name": "SIMAPP",
                "subsystem_type": "SIM",
                "start_command": [sys.executable, "-m", SERVER_MARKER],
                "server_limits": {"min": low, "max": high},
                "completion_time_ms": 60000,
            }
        ],
    }


async def _drive(service: Service, trace: Trace, load: list[Arrival], low: int, high: int, drain_s: float) -> WlmRun:
    admin = HttpClient(service.url, ADMIN_KEY)
    status, body = await admin.request("PUT", "/v1/policy", json.dumps(policy(trace, low, high)))
    assert status == 200, body
    await admin.post("/v1/principals", {"name": "sim-qm", "roles": ["queue_manager"]})
    qm = HttpClient(service.url, (await admin.post("/v1/api-keys", {"principal": "sim-qm"}))[1]["key"])
    status, body = await qm.post("/v1/connections", {"role": "queue_manager", "subsystem_type": "SIM", "subsystem_name": "SIM1"})
    assert status == 201, body
    token, scaling = body["token"], "/v1/scaling/application-environments/SIMAPP"
    deadline = time.monotonic() + CONNECT_SECONDS
    while (await admin.request("GET", scaling))[1]["connectedServers"] < low:
        assert time.monotonic() < deadline, f"the launcher did not connect {low} servers in {CONNECT_SECONDS:g} s"
        await asyncio.sleep(0.2)
    accepted: set[str] = set()
    refused: Counter[str] = Counter()

    async def insert(arrival: Arrival) -> None:
        work = {"connect_token": token, "application_environment": "SIMAPP", "classification": {"userid": arrival.service_class},
                "payload": {"delay_ms": arrival.service_ms}}  # fmt: skip
        try:
            status, answer = await qm.post("/v1/work", work)
        except Exception as exc:
            refused[type(exc).__name__] += 1
            return
        if status == 201:
            accepted.add(answer["token"])
        else:
            refused[str(status)] += 1

    decisions: list[tuple[float, int, int]] = []

    async def watch(start: float) -> None:
        while True:
            found = (await admin.request("GET", scaling))[1]
            decisions.append((round(time.time() - start, 1), found["desiredServers"], found["connectedServers"]))
            await asyncio.sleep(DECISION_EVERY_S)

    start, pending = time.time(), set()
    watcher = asyncio.create_task(watch(start))
    for arrival in load:
        await asyncio.sleep(max(0.0, start + arrival.at_s - time.time()))
        task = asyncio.create_task(insert(arrival))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.sleep(max(0.0, start + trace.length_s - time.time()))
    watcher.cancel()
    await asyncio.gather(*pending)
    unrecorded = await without_record(service.dir / "data", accepted, drain_s)
    await qm.close()
    await admin.close()
    return WlmRun(start, [], [], decisions, len(accepted), dict(refused), len(unrecorded))


def run_wlm(trace: Trace, load: list[Arrival], low: int, high: int, drain_s: float) -> WlmRun:
    """The arrivals through a service of its own, servers within [low, high]; the service stopped at the end."""
    service = Service(workers=1, launcher="true")
    try:
        with Lifetimes(SERVER_MARKER, root=service.process.pid) as lifetimes, asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            run = runner.run(_drive(service, trace, load, low, high, drain_s))
            run.requests = timed(service.dir / "data", "SIMAPP")
            run.data_dir = service.dir / "data"
    finally:
        service.stop()
    run.lifetimes = lifetimes.lifetimes
    return run
