"""The load of bench/lifecycle.py's phases (and of the benchmarks built on them: profile_lifecycle, steady_memory):
a service set up with the example policy, producers and servers over HTTP, and the requests they account for."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass
from typing import NamedTuple

import yaml
from _http import HttpClient
from _latency_phases import Breakdown
from _service import ADMIN_KEY, ROOT, CpuSeconds, Service

POLICY = (
    (ROOT / "examples" / "policy.yaml")
    .read_text()
    .replace("backlog_limit: 100000", "backlog_limit: 10000000")
    .replace("max: 8,", "max: 64,")
)
# Every class in a resource group of its own, capped where no phase comes (the mechanism's cost, not the cap's).
GROUP_CAP = 1_000_000
ONLINE = {"userid": "ATM01"}
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
# The latency phase's last selects come within a long poll of the last insert; more means requests went missing.
LATENCY_SETTLE_SECONDS = 30.0
# How long a phase's window may outlast its seconds while no lifecycle has ended in it (run_phase).
FIRST_LIFECYCLE_DEADLINE_S = 60.0


@dataclass
class Tally:
    """Requests the service accepted (answered 201) and ended (listed in a select's `ended`, or answered by an end),
    over every phase of a run: a run checks that each accepted request ended, so no rate counts a request lost."""

    accepted: int = 0
    ended: int = 0


def grouped_policy() -> str:
    document = yaml.safe_load(POLICY)
    document["resource_groups"] = [{"name": sc["name"], "max_in_flight": GROUP_CAP} for sc in document["service_classes"]]
    for sc in document["service_classes"]:
        sc["resource_group"] = sc["name"]
    return json.dumps(document)


async def setup(url: str, policy: str = POLICY) -> tuple[HttpClient, HttpClient]:
    admin = HttpClient(url, ADMIN_KEY)
    status, body = await admin.request("PUT", "/v1/policy", policy, content_type="application/yaml")
    assert status == 200, body
    keys = []
    for name, roles, permits in (("bench-qm", ["queue_manager"], []), ("bench-server", ["server"], ["CB.**"])):
        await admin.post("/v1/principals", {"name": name, "roles": roles, "permits": permits})
        keys.append((await admin.post("/v1/api-keys", {"principal": name}))[1]["key"])
    await admin.close()
    return HttpClient(url, keys[0]), HttpClient(url, keys[1])


async def connect_server(server: HttpClient, tasks: int) -> str:
    status, body = await server.post(
        "/v1/connections",
        {"role": "server", "subsystem_type": "CB", "subsystem_name": "BENCH", "application_environment": "PAYROLL", "worker_tasks": tasks},
    )
    assert status == 201, body
    return body["token"]


async def select(server: HttpClient, body: dict[str, object]) -> tuple[int, list[str]]:
    """One select: how many requests it ended, and the tokens of those it took."""
    status, result = await server.post("/v1/work/select", body)
    assert status in (200, 204), result
    if status == 204:
        return 0, []
    return len(result["ended"]), [item["token"] for item in result["items"]]


async def let_go(server: HttpClient, token: str, held: list[str]) -> int:
    """End what a stopping server holds: in a select (which takes at most one more, begun) and that one on its own;
    how many ended."""
    ended, held = await select(server, {"connect_token": token, "max_items": 1, "begin": True, "end": [{"token": t} for t in held]})
    for request in held:
        status, body = await server.post(f"/v1/work/{request}/end", {"connect_token": token})
        assert status == 200, body
        ended += 1
    return ended


class Load(NamedTuple):
    """A phase's load: coroutines inserting and selecting, and the requests per insert (twice that) and select."""

    producers: int
    servers: int
    batch: int


SINGLE = Load(producers=8, servers=16, batch=1)
BATCHED = Load(producers=2, servers=4, batch=250)


async def run_phase(
    qm: HttpClient,
    server: HttpClient,
    qm_token: str,
    tally: Tally,
    load: Load,
    *,
    seconds: float,
    warm_up: float,
    service: Service | None = None,
) -> tuple[float, CpuSeconds | None]:
    """Lifecycles ended per second while `load`'s producers and servers run flat out for `seconds` (after
    `warm_up`), and the CPU the `service` used per lifecycle meanwhile (ms)."""
    producers, servers, batch = load
    stop = asyncio.Event()
    ended = inserted = 0
    # Producers stay this far ahead of the servers: a steady state, not a backlog growing for the run.
    most_ahead = max(servers * batch * 4, 1000)
    tokens = [await connect_server(server, batch) for _ in range(servers)]

    async def produce() -> None:
        nonlocal inserted
        while not stop.is_set():
            if inserted - ended > most_ahead:
                await asyncio.sleep(0.001)
                continue
            if batch == 1:
                status, body = await qm.post(
                    "/v1/work",
                    {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": {"n": 1}},
                )
            else:
                items = [{"classification": ONLINE, "payload": {"n": i}} for i in range(batch * 2)]
                status, body = await qm.post(
                    "/v1/work:batch", {"connect_token": qm_token, "application_environment": "PAYROLL", "items": items}
                )
            assert status == 201, body
            inserted += 1 if batch == 1 else len(items)

    async def serve(token: str) -> None:
        nonlocal ended
        held: list[str] = []
        while not stop.is_set():
            done, held = await select(
                server,
                {"connect_token": token, "wait_seconds": 0.5, "max_items": batch, "begin": True, "end": [{"token": t} for t in held]},
            )
            ended += done
        last = await let_go(server, token, held)
        ended += last  # not `+= await`: that reads `ended` before the await, losing what others add meanwhile

    tasks = [asyncio.create_task(produce()) for _ in range(producers)] + [asyncio.create_task(serve(t)) for t in tokens]
    await asyncio.sleep(warm_up)
    start_count, started = ended, time.perf_counter()
    cpu_before = service.cpu_seconds() if service else None
    await asyncio.sleep(seconds)
    # A smoke run's half second can pass under a heavy load before the first lifecycle ends (seen at load 17): the
    # window then lasts until one has, within a deadline, so that its figures measure something.
    deadline = time.monotonic() + FIRST_LIFECYCLE_DEADLINE_S
    while ended == start_count and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    lifecycles = ended - start_count
    rate = lifecycles / (time.perf_counter() - started)
    cpu_ms = (service.cpu_seconds() - cpu_before).per(lifecycles) if service and cpu_before else None
    stop.set()
    await asyncio.gather(*tasks)
    tally.accepted += inserted
    drained = await drain(server, batch)
    tally.ended += ended + drained
    for token in tokens:
        await server.request("DELETE", f"/v1/connections/{token}")
    return rate, cpu_ms


async def drain(server: HttpClient, batch: int) -> int:
    """End whatever a phase left queued, so the next phase starts from an empty queue; how many ended."""
    token = await connect_server(server, batch)
    ended, held = 0, list[str]()
    while True:
        done, taken = await select(server, {"connect_token": token, "max_items": batch, "begin": True, "end": [{"token": t} for t in held]})
        ended += done
        if not (done or taken):
            break
        held = taken
    await server.request("DELETE", f"/v1/connections/{token}")
    return ended


async def latency_phase(
    qm: HttpClient,
    server: HttpClient,
    qm_token: str,
    tally: Tally,
    rate: float,
    seconds: float,
    warm_up: float,
    service: Service,
    breakdown: Breakdown | None = None,
) -> tuple[list[float], CpuSeconds]:
    """Insert -> select latencies (ms) of an open-loop producer at `rate` per second, and the CPU the `service` used
    per request (ms) from the first insert to the last select; each measured request's phases in `breakdown`."""
    samples: list[float] = []
    numbers = itertools.count()
    selected = inserted = ended = 0
    stop = asyncio.Event()
    tokens = [await connect_server(server, 1) for _ in range(8)]

    async def serve(token: str) -> None:
        nonlocal selected, ended
        held: list[str] = []
        while not stop.is_set():
            status, result, timing = await server.timed_request(
                "POST", "/v1/work/select", {"connect_token": token, "wait_seconds": 1, "begin": True, "end": [{"token": t} for t in held]}
            )
            assert status in (200, 204), result
            held = []
            if status == 200:
                now = time.time()
                ended += len(result["ended"])
                selected += len(result["items"])
                # Requests of the warm-up carry no timestamp: taken, not measured.
                samples.extend((now - item["payload"]["t"]) * 1000 for item in result["items"] if "t" in item["payload"])
                if breakdown is not None:
                    for item in result["items"]:
                        if "n" in item["payload"]:
                            breakdown.selected(item["payload"]["n"], now, timing)
                held = [item["token"] for item in result["items"]]
        last = await let_go(server, token, held)
        ended += last

    async def insert(measured: bool) -> None:
        nonlocal inserted
        payload = {"t": time.time(), "n": next(numbers)} if measured else {"warm-up": True}
        status, body, timing = await qm.timed_request(
            "POST",
            "/v1/work",
            {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": payload},
        )
        assert status == 201, body
        inserted += 1
        if breakdown is not None and measured:
            breakdown.inserted(payload["n"], payload["t"], time.time(), timing)  # type: ignore[arg-type]

    servers = [asyncio.create_task(serve(t)) for t in tokens]
    inserts = []
    cpu_before = service.cpu_seconds()
    # The warm-up (new servers' first calls, connections opened) is not measured: steady state is.
    interval, next_at = 1 / rate, time.perf_counter()
    measured_from, deadline = next_at + warm_up, next_at + warm_up + seconds
    while next_at < deadline:
        inserts.append(asyncio.create_task(insert(next_at >= measured_from)))
        next_at += interval
        await asyncio.sleep(max(0, next_at - time.perf_counter()))
    await asyncio.gather(*inserts)
    settle_by = time.monotonic() + LATENCY_SETTLE_SECONDS
    while selected < inserted and time.monotonic() < settle_by:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.gather(*servers)
    tally.accepted += inserted
    tally.ended += ended
    for token in tokens:
        await server.request("DELETE", f"/v1/connections/{token}")
    return samples, (service.cpu_seconds() - cpu_before).per(len(inserts))
