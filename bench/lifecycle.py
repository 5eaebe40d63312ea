"""The whole work lifecycle over HTTP, against the real service, with RQ on the same Redis as the yardstick.

    .venv/bin/python bench/lifecycle.py [--seconds 10]
    .venv/bin/python bench/lifecycle.py --smoke     # seconds: tiny sizes, one worker, the same phases and checks

Phases (producers and servers are coroutines of this one process; the service runs in its own processes; all
share this machine's cores):
  single   producers insert one request per call; servers select one at a time, beginning it and ending the
           previous one in the same call (`begin: true`, `end: [...]`), i.e. 2 HTTP calls per lifecycle
  batch    producers insert 500 per call (`POST /v1/work:batch`); servers select up to 250 and end them in the
           next select
  latency  an open-loop producer at half the single-request peak, or at --latency-rate (after a second of warm-up); servers
           long-poll; insert -> select
           latency measured from just before the insert is sent to the moment a server has the request
  rq       the same lifecycles through RQ (enqueue; SimpleWorker processes; JSON serializer) on the service's Redis
Each phase also reports the CPU the service's processes and its Redis used per lifecycle (ms, from /proc): it moves
far less with this machine's hour than the rates do. `--redis-cluster 3` runs the single, batch and latency phases
again with the service on a 3-master Redis Cluster started here, and reports them beside one Redis's (`cluster_*`).
`--redis-replica` runs them again on a Redis started here with a replica of it (`replica_*`): in strict mode each
insert then waits until the replica has it (WAIT); the replica's CPU counts as Redis's. `--resource-groups` runs
them again on a fresh service whose policy puts every service class in a resource group of its own, with a cap no
phase reaches (`groups_*`): the cost of the groups' slots per lifecycle. `--setting NAME=VALUE` (repeatable) gives the
service a setting (WLM_NAME), e.g. `--setting sample_interval_ms=3600000` for runs without the delay sampling duty.

Every run checks that each request the service accepted (in every phase, on every service) was ended, that each RQ
job finished, and that every figure is above 0; a failed check makes the exit status 1. `--smoke` runs the default
phases (single, batch, latency, rq) for half a second each, with 20 RQ jobs, on a service of one worker (a second
worker's start is 2-3 s of CPU, more than the phases take; bench/metrics_scrape.py's smoke starts two): the same
code paths and checks. The cluster, replica and resource-group runs each start another service (many seconds more
on a busy machine) and are left to their options, which a smoke run takes too (`--smoke --resource-groups`). The
last line printed is one JSON object with the figures (those named in HEADLINE among them), the checks that failed
and whether this was a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import redis
import uvloop
import yaml
from rq import Queue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import HttpClient  # noqa: E402
from _latency_phases import Breakdown, show  # noqa: E402
from _service import ADMIN_KEY, ROOT, RQ_SERIALIZER, CpuSeconds, Service, machine, rq_workers  # noqa: E402
from _smoke import above_zero, conclude, parse_args  # noqa: E402

HEADLINE = (
    "lifecycles_per_s_single",
    "lifecycles_per_s_batch",
    "insert_to_select_p50_ms",
    "insert_to_select_p99_ms",
    "service_cpu_ms_single",
    "redis_cpu_ms_single",
    "rq_lifecycles_per_s",
    "single_vs_rq",
    "batch_vs_rq",
)
LATENCY_HEADLINE = ("insert_to_select_p50_ms", "insert_to_select_p99_ms")
SMOKE = {"seconds": 0.5, "warm_up": 0.25, "rq_jobs": 20, "workers": 1}
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
RQ_DEADLINE_SECONDS = 300.0
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


def rq_phase(redis_url: str, jobs: int, workers: int) -> tuple[float, int]:
    """RQ lifecycles per second: `jobs` enqueued while `workers` SimpleWorker processes run them; and how many
    finished (all, unless one failed or the deadline passed)."""
    connection = redis.Redis.from_url(redis_url)
    queue = Queue("bench", connection=connection, serializer=RQ_SERIALIZER)
    queue.empty()
    with rq_workers(redis_url, "bench", workers):
        started = time.perf_counter()
        for n in range(jobs):
            queue.enqueue("builtins.len", [n])
        deadline = time.monotonic() + RQ_DEADLINE_SECONDS
        while (finished := queue.finished_job_registry.count) < jobs and not queue.failed_job_registry.count:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return finished / (time.perf_counter() - started), finished


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def main_async(service: Service, args: argparse.Namespace, tally: Tally, policy: str = POLICY) -> dict[str, Any]:
    qm, server = await setup(service.url, policy)
    status, body = await qm.post("/v1/connections", QM)
    assert status == 201, body
    qm_token = body["token"]
    # The load generator's own collector pauses would show up as the service's latency.
    gc.freeze()
    figures: dict[str, Any] = {}
    if not args.latency_only:
        figures = await throughput_phases(qm, server, qm_token, tally, args, service)
    rate = args.latency_rate or figures["lifecycles_per_s_single"] / 2
    breakdown = Breakdown() if args.breakdown else None
    # Nor any collection of this process while it times requests (a full one took 250 ms on a busy machine, on every
    # request in flight): what the phase leaves is collected after it.
    gc.collect()
    gc.disable()
    try:
        samples, latency_cpu = await latency_phase(qm, server, qm_token, tally, rate, args.seconds, args.warm_up, service, breakdown)
    finally:
        gc.enable()
    assert samples, "the latency phase measured no request"
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    print(
        f"latency at {rate:,.0f}/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(samples)} requests; CPU per request {latency_cpu}",
        flush=True,
    )
    if breakdown is not None:
        figures["latency_breakdown"] = breakdown.report()
        show(figures["latency_breakdown"])
    await qm.close()
    await server.close()
    return figures | {
        "insert_to_select_p50_ms": round(p50, 2),
        "insert_to_select_p99_ms": round(p99, 2),
        "latency_rate_per_s": round(rate),
        "service_cpu_ms_latency": round(latency_cpu.service, 4),
        "redis_cpu_ms_latency": round(latency_cpu.redis, 4),
    }


async def throughput_phases(
    qm: HttpClient, server: HttpClient, qm_token: str, tally: Tally, args: argparse.Namespace, service: Service
) -> dict[str, Any]:
    """The single and batch phases' figures."""
    single, single_cpu = await run_phase(qm, server, qm_token, tally, SINGLE, seconds=args.seconds, warm_up=args.warm_up, service=service)
    assert single_cpu is not None
    print(f"single: {single:,.0f} lifecycles/s; CPU per lifecycle {single_cpu}", flush=True)
    batch, batch_cpu = await run_phase(qm, server, qm_token, tally, BATCHED, seconds=args.seconds, warm_up=args.warm_up, service=service)
    assert batch_cpu is not None
    print(f"batch:  {batch:,.0f} lifecycles/s; CPU per lifecycle {batch_cpu}", flush=True)
    return {
        "lifecycles_per_s_single": round(single),
        "lifecycles_per_s_batch": round(batch),
        "service_cpu_ms_single": round(single_cpu.service, 4),
        "redis_cpu_ms_single": round(single_cpu.redis, 4),
        "service_cpu_ms_batch": round(batch_cpu.service, 4),
        "redis_cpu_ms_batch": round(batch_cpu.redis, 4),
    }


def phases(service: Service, args: argparse.Namespace, tally: Tally, policy: str = POLICY) -> dict[str, float]:
    """The single, batch and latency phases on `service`, which is stopped after them."""
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the event loop the service runs on too
            return runner.run(main_async(service, args, tally, policy))
    finally:
        service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase's measured time")
    parser.add_argument("--warm-up", type=float, default=1.0, help="each phase's load before it is measured (s)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes of the service")
    parser.add_argument("--rq-jobs", type=int, default=10_000)
    parser.add_argument("--latency-rate", type=float, help="the latency phase's inserts per second (default: half the single rate)")
    parser.add_argument("--durability", choices=("strict", "fast"), help="WLM_DURABILITY (default: the service's)")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=VALUE", help="a service setting, e.g. sample_interval_ms=3600000 (WLM_NAME)"
    )
    parser.add_argument(
        "--redis-cluster", type=int, metavar="MASTERS", help="run the phases again on a Redis Cluster of this many masters, started here"
    )
    parser.add_argument("--redis-replica", action="store_true", help="run the phases again on a Redis with a replica, started here")
    parser.add_argument("--resource-groups", action="store_true", help="run the phases again with every class in a resource group")
    parser.add_argument("--latency-only", action="store_true", help="run the latency phase alone (at --latency-rate)")
    parser.add_argument(
        "--breakdown", action="store_true", help="the latency phase's requests phase by phase (the service's WLM_TIMING_HEADER on)"
    )
    args = parse_args(parser, SMOKE)
    if args.latency_only and (args.latency_rate is None or args.redis_cluster or args.redis_replica or args.resource_groups):
        parser.error("--latency-only needs --latency-rate, and runs on one service")
    print(f"machine: {machine()}; service ({args.workers} workers), Redis and load generator share it", flush=True)
    durability = (
        dict(setting.split("=", 1) for setting in args.setting)
        | ({"durability": args.durability} if args.durability else {})
        | ({"timing_header": "true"} if args.breakdown else {})
    )
    tally = Tally()
    service = Service(workers=args.workers, **durability)
    rq_finished = args.rq_jobs
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the event loop the service runs on too
            figures = runner.run(main_async(service, args, tally))
        if not args.latency_only:
            rq_rate, rq_finished = rq_phase(service.redis_url, args.rq_jobs, workers=2)
            print(f"rq:     {rq_rate:,.0f} lifecycles/s (2 SimpleWorkers)", flush=True)
    finally:
        service.stop()
    if not args.latency_only:
        figures |= {
            "rq_lifecycles_per_s": round(rq_rate),
            "single_vs_rq": round(figures["lifecycles_per_s_single"] / rq_rate, 2),
            "batch_vs_rq": round(figures["lifecycles_per_s_batch"] / rq_rate, 2),
        }
    if args.redis_cluster:
        on_cluster = cluster_phases(args.redis_cluster, args, durability, tally)
        figures |= {f"cluster_{name}": value for name, value in on_cluster.items()}
        figures["cluster_vs_one_single"] = round(on_cluster["lifecycles_per_s_single"] / figures["lifecycles_per_s_single"], 3)
        figures["cluster_vs_one_batch"] = round(on_cluster["lifecycles_per_s_batch"] / figures["lifecycles_per_s_batch"], 3)
    if args.resource_groups:
        print("with every class in a resource group:", flush=True)
        grouped = phases(Service(workers=args.workers, **durability), args, tally, grouped_policy())
        figures |= {f"groups_{name}": value for name, value in grouped.items()}
        for phase in ("single", "batch"):
            figures[f"groups_vs_none_{phase}"] = round(grouped[f"lifecycles_per_s_{phase}"] / figures[f"lifecycles_per_s_{phase}"], 3)
            figures[f"groups_vs_none_service_cpu_{phase}"] = round(
                grouped[f"service_cpu_ms_{phase}"] / figures[f"service_cpu_ms_{phase}"], 3
            )
    if args.redis_replica:
        replicated = replica_phases(args, durability, tally)
        figures |= {f"replica_{name}": value for name, value in replicated.items()}
        figures["replica_vs_one_single"] = round(replicated["lifecycles_per_s_single"] / figures["lifecycles_per_s_single"], 3)
        figures["replica_vs_one_batch"] = round(replicated["lifecycles_per_s_batch"] / figures["lifecycles_per_s_batch"], 3)
    checks = {
        f"every accepted request ended ({tally.ended} of {tally.accepted})": tally.ended == tally.accepted,
        f"every RQ job finished ({rq_finished} of {args.rq_jobs})": rq_finished == args.rq_jobs,
        **above_zero(
            figures,
            [
                *(LATENCY_HEADLINE if args.latency_only else HEADLINE),
                *(name for name, value in figures.items() if isinstance(value, int | float)),
            ],
        ),
    }
    conclude({**figures, "durability": args.durability or "default", "settings": args.setting}, checks, args.smoke)


def replica_phases(args: argparse.Namespace, durability: dict[str, str], tally: Tally) -> dict[str, float]:
    """The same phases with the service on a Redis (fsyncing as the service's own would in the same mode) that has a
    replica, attached before the service starts."""
    sys.path.append(str(ROOT))
    from app.redis.embedded import EmbeddedRedis
    from tests.redis_cluster import replica_of

    print("on a Redis with a replica:", flush=True)
    with tempfile.TemporaryDirectory(prefix="wlm-bench-replica-") as scratch:
        master = EmbeddedRedis(Path(scratch) / "master", args.durability or "strict")
        url = master.start()
        try:
            with replica_of(Path(scratch) / "replica", url) as replica:
                assert master.process is not None
                pids = (master.process.pid, replica.process.pid)
                return phases(Service(workers=args.workers, redis_url=url, redis_processes=pids, **durability), args, tally)
        finally:
            master.stop()


def cluster_phases(masters: int, args: argparse.Namespace, durability: dict[str, str], tally: Tally) -> dict[str, float]:
    """The same phases with the service on a Redis Cluster of `masters` (its nodes fsync as the service's Redis would
    in the same mode; their CPU counts as Redis's). One environment's queues live on one master, so on this machine
    the figure is the cost per lifecycle of the cluster client, not the cluster's capacity."""
    sys.path.append(str(ROOT))
    from tests.redis_cluster import redis_cluster

    print(f"on a Redis Cluster of {masters} masters:", flush=True)
    appendfsync = "everysec" if args.durability == "fast" else "always"
    with (
        tempfile.TemporaryDirectory(prefix="wlm-bench-cluster-") as scratch,
        redis_cluster(Path(scratch), masters, appendfsync=appendfsync) as cluster,
    ):
        pids = tuple(process.pid for process in cluster.processes.values())
        return phases(Service(workers=args.workers, redis_url=cluster.masters[0], redis_processes=pids, **durability), args, tally)


if __name__ == "__main__":
    main()
