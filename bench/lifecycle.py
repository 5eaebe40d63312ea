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
insert then waits until the replica has it (WAIT); the replica's CPU counts as Redis's. `--resource-groups` compares
two services started for it, one whose policy puts every service class in a resource group of its own with a cap no
phase reaches, one without (`groups_*`): the cost of the groups' slots per lifecycle. They run side by side, each
phase in `--rounds` rounds that alternate which goes first, so both see the same hour (two services one after the
other spread 0.77-1.02 in the ratio of their 6 s phases); each ratio is the median of its rounds'.
`--setting NAME=VALUE` (repeatable) gives the service a setting (WLM_NAME), e.g. `--setting
sample_interval_ms=3600000` for runs without the delay sampling duty.

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
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import redis
import uvloop
from rq import Queue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import HttpClient  # noqa: E402
from _latency_phases import Breakdown, show  # noqa: E402
from _lifecycle_phases import (  # noqa: E402
    BATCHED,
    POLICY,
    QM,
    SINGLE,
    Tally,
    grouped_policy,
    latency_phase,
    run_phase,
    setup,
)
from _service import ROOT, RQ_SERIALIZER, CpuSeconds, Service, machine, rq_workers  # noqa: E402
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
RQ_DEADLINE_SECONDS = 300.0


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


async def main_async(service: Service, args: argparse.Namespace, tally: Tally) -> dict[str, Any]:
    qm, server, qm_token = await connected(service.url, POLICY)
    # The load generator's own collector pauses would show up as the service's latency.
    gc.freeze()
    figures: dict[str, Any] = {}
    if not args.latency_only:
        figures = await throughput_phases(qm, server, qm_token, tally, args, service)
    rate = args.latency_rate or figures["lifecycles_per_s_single"] / 2
    breakdown = Breakdown() if args.breakdown else None
    samples, latency_cpu = await uncollected_latency(qm, server, qm_token, tally, rate, args, service, breakdown)
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


async def uncollected_latency(
    qm: HttpClient,
    server: HttpClient,
    qm_token: str,
    tally: Tally,
    rate: float,
    args: argparse.Namespace,
    service: Service,
    breakdown: Breakdown | None = None,
) -> tuple[list[float], CpuSeconds]:
    """The latency phase with no collection of this process while it times requests (a full one took 250 ms on a busy
    machine, on every request in flight): what the phase leaves is collected after it."""
    gc.collect()
    gc.disable()
    try:
        return await latency_phase(qm, server, qm_token, tally, rate, args.seconds, args.warm_up, service, breakdown)
    finally:
        gc.enable()


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


def phases(service: Service, args: argparse.Namespace, tally: Tally) -> dict[str, float]:
    """The single, batch and latency phases on `service`, which is stopped after them."""
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the event loop the service runs on too
            return runner.run(main_async(service, args, tally))
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
    parser.add_argument(
        "--resource-groups", action="store_true", help="compare every class in a resource group with none, side by side (--rounds)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="--resource-groups: each phase's rounds per side")
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
        figures |= groups_side_by_side(args, durability, tally)
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


def groups_side_by_side(args: argparse.Namespace, durability: dict[str, str], tally: Tally) -> dict[str, Any]:
    """Every class in a resource group against none, on two services started for it, one phase at a time in rounds
    that alternate which goes first (none, groups; groups, none; ...): both see the same hour, and each ratio is the
    median of its rounds' (one round's: the two phases next to each other). Then the latency phase on the grouped one."""
    print(f"resource groups against none, side by side ({args.rounds} rounds a phase, alternating):", flush=True)
    with ExitStack() as stack:
        none = Service(workers=args.workers, **durability)
        stack.callback(none.stop)
        groups = Service(workers=args.workers, **durability)
        stack.callback(groups.stop)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the event loop the service runs on too
            return runner.run(alternate_rounds(none, groups, args, tally))


async def alternate_rounds(none: Service, groups: Service, args: argparse.Namespace, tally: Tally) -> dict[str, Any]:
    sides = {"none": (none, await connected(none.url, POLICY)), "groups": (groups, await connected(groups.url, grouped_policy()))}
    gc.freeze()
    figures: dict[str, Any] = {}
    # A service's first phases pay its first-time costs (the first round's ratio was the lowest of three in each of
    # three runs: 0.745, 0.929, 0.722): a short phase of each load on each side, unmeasured, before the rounds.
    for _, (qm, server, qm_token) in sides.values():
        for load in (SINGLE, BATCHED):
            await run_phase(qm, server, qm_token, tally, load, seconds=args.warm_up, warm_up=0)
    for phase, load in (("single", SINGLE), ("batch", BATCHED)):
        rates: dict[str, list[float]] = {"none": [], "groups": []}
        cpus: dict[str, list[CpuSeconds]] = {"none": [], "groups": []}
        for round_ in range(args.rounds):
            for side in ("none", "groups") if round_ % 2 == 0 else ("groups", "none"):
                service, (qm, server, qm_token) = sides[side]
                rate, cpu = await run_phase(qm, server, qm_token, tally, load, seconds=args.seconds, warm_up=args.warm_up, service=service)
                assert cpu is not None
                rates[side].append(rate)
                cpus[side].append(cpu)
                print(f"  {phase} round {round_ + 1}, {side}: {rate:,.0f} lifecycles/s; CPU per lifecycle {cpu}", flush=True)
        figures |= side_by_side_figures(phase, rates, cpus)
    service, (qm, server, qm_token) = sides["groups"]
    rate = args.latency_rate or figures["groups_lifecycles_per_s_single"] / 2
    samples, _ = await uncollected_latency(qm, server, qm_token, tally, rate, args, service)
    assert samples, "the grouped latency phase measured no request"
    for qm, server, _ in (side for _, side in sides.values()):
        await qm.close()
        await server.close()
    return figures | {
        "groups_insert_to_select_p50_ms": round(percentile(samples, 50), 2),
        "groups_insert_to_select_p99_ms": round(percentile(samples, 99), 2),
    }


def side_by_side_figures(phase: str, rates: dict[str, list[float]], cpus: dict[str, list[CpuSeconds]]) -> dict[str, float]:
    """One phase's figures from its rounds: each side's mean rate and CPU per lifecycle, and the grouped side's ratios
    to none's as the median of the rounds' ratios."""

    def median_ratio(of: list[float], to: list[float]) -> float:
        return round(statistics.median(g / n for g, n in zip(of, to, strict=True)), 3)

    totals = {side: [cpu.service + cpu.redis for cpu in cpus[side]] for side in cpus}
    return {
        f"groups_lifecycles_per_s_{phase}": round(statistics.mean(rates["groups"])),
        f"groups_baseline_lifecycles_per_s_{phase}": round(statistics.mean(rates["none"])),
        f"groups_service_cpu_ms_{phase}": round(statistics.mean(cpu.service for cpu in cpus["groups"]), 4),
        f"groups_redis_cpu_ms_{phase}": round(statistics.mean(cpu.redis for cpu in cpus["groups"]), 4),
        f"groups_vs_none_{phase}": median_ratio(rates["groups"], rates["none"]),
        f"groups_vs_none_service_cpu_{phase}": median_ratio([c.service for c in cpus["groups"]], [c.service for c in cpus["none"]]),
        f"groups_vs_none_cpu_{phase}": median_ratio(totals["groups"], totals["none"]),
    }


async def connected(url: str, policy: str) -> tuple[HttpClient, HttpClient, str]:
    """A service set up with `policy`: its queue manager's and server's clients, and the queue manager's connection."""
    qm, server = await setup(url, policy)
    status, body = await qm.post("/v1/connections", QM)
    assert status == 201, body
    return qm, server, body["token"]


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
