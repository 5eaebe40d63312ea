"""Redis memory under a steady rate of batched lifecycles (issue 41, point 4's target: at 2,000 lifecycles a second,
≤ 100 MB after 10 minutes and projected to an hour).

    .venv/bin/python bench/steady_memory.py [--rate 2000] [--minutes 10] [--sample-seconds 10]
    .venv/bin/python bench/steady_memory.py --smoke     # 6 s at 200 a second, a sample every second

The real service (`wlm serve`, its own embedded Redis, the default WLM_TOMBSTONE_SECONDS) and a load generator in
this process: one queue manager inserts batches (`POST /v1/work:batch`, as many as are due at `--rate` every 0.1 s,
at most 1,000 a call, never more than two seconds of work ahead of the servers), four servers select up to 250 at a
time with `begin`, ending what they held in the same call. Every `--sample-seconds` the sampler reads Redis `INFO
memory` (`used_memory`, `used_memory_dataset`, `used_memory_overhead`), the keys by type and the tombstones held
(HLEN of the environment's buckets).

Figures: the rate reached (`lifecycles_per_s`); `used_memory` before the load, at its end and at most; its slope
over the last 5 minutes (MB a minute, least squares); `bytes_per_ended`, what Redis grew by per tombstone held at
the end; the projection to an hour. Tombstones are kept from the bound to a third longer, so after 4/3 of the
bound they saw-tooth between `rate × bound` and `rate × 4/3 × bound` and then stay so (docs/architecture.md,
"Tombstones"): the projection is the end's memory without its tombstones, plus the slope of that remainder over the
last 5 minutes carried on to the hour (never below 0), plus the most tombstones the bound keeps at the rate reached
(`redis_mb_hour_projected`) and at the rate asked (`redis_mb_hour_at_rate_asked`), at the bytes a tombstone took
(`MEMORY USAGE` of the buckets at the end, every field counted, over their HLEN).

Checks: every accepted request ended; at every sample, no more tombstones than ends since 4/3 of the bound plus a
sample before (what the buckets may hold); the figures above 0. The last line is one JSON object of the figures
(those named in HEADLINE among them), the checks that failed and whether this was a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import uvloop
from redis.asyncio import Redis

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _http import HttpClient  # noqa: E402
from _lifecycle_phases import ONLINE, QM, connect_server, drain, let_go, select, setup  # noqa: E402
from _service import CpuSeconds, Service, machine  # noqa: E402
from _smoke import above_zero, conclude, parse_args  # noqa: E402

from app.config import Settings  # noqa: E402
from app.queues.keys import TOMBSTONE_BUCKETS, AeKeys  # noqa: E402

HEADLINE = (
    "lifecycles_per_s",
    "redis_mb_start",
    "redis_mb_end",
    "redis_mb_max",
    "mb_per_min_last_5_min",
    "bytes_per_ended",
    "redis_mb_hour_projected",
    "redis_mb_hour_at_rate_asked",
)
SMOKE = {"minutes": 0.1, "rate": 200, "sample_seconds": 1}
PAYROLL = AeKeys("wlm", "LOCAL", "PAYROLL")  # the example policy's environment in the service's Redis
SERVERS, SELECT_MAX, INSERT_MAX, TICK_S, AHEAD_S = 4, 250, 1_000, 0.1, 2.0
SLOPE_WINDOW_S = 300.0
MB = 1e6


@dataclass
class Sample:
    t: float  # seconds since the load began
    ended: int
    used: int
    dataset: int
    overhead: int
    tombstones: int
    keys: dict[str, int]


@dataclass
class Load:
    inserted: int = 0
    ended: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def sample(redis: Redis, t: float, load: Load) -> Sample:
    """The tombstones first and the ends counted here right after: an end is in Redis before its answer is counted
    here, so the tombstones may lead the count by the calls under way, never lag it."""
    tombstones = sum([await redis.hlen(key) for key in PAYROLL.tombstones])
    ended = load.ended
    info = await redis.info("memory")
    keys: dict[str, int] = {}
    async for key in redis.scan_iter(count=1000):
        kind = await redis.type(key)
        if kind != "none":  # expired since the scan saw it
            keys[kind] = keys.get(kind, 0) + 1
    return Sample(t, ended, info["used_memory"], info["used_memory_dataset"], info["used_memory_overhead"], tombstones, keys)


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t, mean_v = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread if spread else 0.0


async def produce(qm: HttpClient, qm_token: str, load: Load, rate: float) -> None:
    """Batches of what is due at `rate` since the start, no further ahead of the servers than AHEAD_S of work."""
    started = time.perf_counter()
    while not load.stop.is_set():
        due = int(rate * (time.perf_counter() - started)) - load.inserted
        room = int(rate * AHEAD_S) - (load.inserted - load.ended)
        count = min(due, room, INSERT_MAX)
        if count <= 0:
            await asyncio.sleep(TICK_S)
            continue
        items = [{"classification": ONLINE, "payload": {"n": i}} for i in range(count)]
        status, body = await qm.post("/v1/work:batch", {"connect_token": qm_token, "application_environment": "PAYROLL", "items": items})
        assert status == 201, body
        load.inserted += count


async def serve(server: HttpClient, token: str, load: Load) -> None:
    held: list[str] = []
    while not load.stop.is_set():
        body = {"connect_token": token, "wait_seconds": 0.5, "max_items": SELECT_MAX, "begin": True, "end": [{"token": t} for t in held]}
        done, held = await select(server, body)
        load.ended += done
    last = await let_go(server, token, held)
    load.ended += last


@dataclass
class Run:
    samples: list[Sample]
    load: Load
    seconds: float
    cpu: CpuSeconds  # ms per lifecycle, the service's and its Redis's, over the load and its drain
    per_tombstone: int  # bytes, at the end
    largest: dict[str, float]  # the keys taking most memory at the end (kB, every element counted)


async def largest_keys(redis: Redis, count: int = 8) -> dict[str, float]:
    sizes = {key: await redis.memory_usage(key, samples=0) or 0 async for key in redis.scan_iter(count=1000)}
    return {key: round(size / 1000, 1) for key, size in sorted(sizes.items(), key=lambda item: -item[1])[:count]}


async def run(service: Service, args: argparse.Namespace) -> Run:
    """The steady load for `--minutes`, sampled."""
    qm, server = await setup(service.url)
    status, body = await qm.post("/v1/connections", QM)
    assert status == 201, body
    redis = Redis.from_url(service.redis_url, decode_responses=True)
    load = Load()
    try:
        samples = [await sample(redis, 0.0, load)]
        tokens = [await connect_server(server, SELECT_MAX) for _ in range(SERVERS)]
        cpu_before = service.cpu_seconds()
        tasks = [asyncio.create_task(produce(qm, body["token"], load, args.rate))]
        tasks += [asyncio.create_task(serve(server, token, load)) for token in tokens]
        started, seconds = time.perf_counter(), args.minutes * 60
        next_at = args.sample_seconds
        while next_at <= seconds + 1e-6:
            await asyncio.sleep(max(0.0, started + next_at - time.perf_counter()))
            samples.append(last := await sample(redis, time.perf_counter() - started, load))
            print(
                f"{last.t:6.0f} s: {last.ended:>9,} ended, {last.used / MB:6.1f} MB used ({last.dataset / MB:.1f} dataset, "
                f"{last.overhead / MB:.1f} overhead), {last.tombstones:,} tombstones, keys {last.keys}",
                flush=True,
            )
            next_at += args.sample_seconds
        elapsed = time.perf_counter() - started
        load.stop.set()
        await asyncio.gather(*tasks)
        load.ended += await drain(server, SELECT_MAX)
        for token in tokens:
            await server.request("DELETE", f"/v1/connections/{token}")
        cpu = (service.cpu_seconds() - cpu_before).per(load.ended)
        tombstones = sum([await redis.hlen(key) for key in PAYROLL.tombstones])
        memory = sum([await redis.memory_usage(key, samples=0) or 0 for key in PAYROLL.tombstones])
        per_tombstone = round(memory / tombstones) if tombstones else 0
        largest = await largest_keys(redis)
    finally:
        await redis.aclose()
        await qm.close()
        await server.close()
    return Run(samples, load, elapsed, cpu, per_tombstone, largest)


def figures_of(run: Run, kept_s: float, rate: float) -> dict[str, object]:
    samples, per_tombstone = run.samples, run.per_tombstone
    first, last = samples[0], samples[-1]
    reached = last.ended / run.seconds
    recent = [s for s in samples if s.t >= last.t - SLOPE_WINDOW_S]
    rest_slope = slope_per_min([(s.t, (s.used - s.tombstones * per_tombstone) / MB) for s in recent])
    rest_at_hour = (last.used - last.tombstones * per_tombstone) / MB + max(0.0, rest_slope) * max(0.0, 3600 - last.t) / 60
    return {
        "rate_asked": rate,
        "minutes": round(run.seconds / 60, 2),
        "lifecycles_per_s": round(reached),
        "tombstone_kept_s": round(kept_s),
        "redis_mb_start": round(first.used / MB, 1),
        "redis_mb_end": round(last.used / MB, 1),
        "redis_mb_max": round(max(s.used for s in samples) / MB, 1),
        "dataset_mb_end": round(last.dataset / MB, 1),
        "mb_per_min_last_5_min": round(slope_per_min([(s.t, s.used / MB) for s in recent]), 3),
        "rest_mb_per_min_last_5_min": round(rest_slope, 3),
        "tombstones_end": last.tombstones,
        "tombstones_max": max(s.tombstones for s in samples),
        "bytes_per_tombstone": per_tombstone,
        "bytes_per_ended": round((last.used - first.used) / last.tombstones, 1) if last.tombstones else 0,
        "redis_mb_hour_projected": round(rest_at_hour + reached * kept_s * per_tombstone / MB, 1),
        "redis_mb_hour_at_rate_asked": round(rest_at_hour + rate * kept_s * per_tombstone / MB, 1),
        "keys_end": sum(last.keys.values()),
        "accepted": run.load.inserted,
        "ended": run.load.ended,
        "service_cpu_ms": round(run.cpu.service, 4),
        "redis_cpu_ms": round(run.cpu.redis, 4),
        "largest_keys_kb": run.largest,
    }


def beyond_bound(samples: list[Sample], kept_s: float) -> list[str]:
    """The samples holding more tombstones than the ends since `kept_s` and one sample before, and those the
    servers' calls under way may have made (ended in Redis, not yet counted here): time, tombstones, ends."""
    beyond = []
    for s in samples:
        earlier = [e for e in samples if e.t <= s.t - kept_s]
        since = s.ended - (earlier[-2].ended if len(earlier) > 1 else 0)
        if s.tombstones > since + SERVERS * SELECT_MAX:
            beyond.append(f"{s.t:.0f} s: {s.tombstones} > {since}")
    return beyond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=2_000, help="lifecycles a second asked")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load runs")
    parser.add_argument("--sample-seconds", type=float, default=10.0, help="how often Redis is sampled")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes of the service")
    parser.add_argument("--durability", choices=("strict", "fast"), help="WLM_DURABILITY (default: the service's)")
    args = parse_args(parser, SMOKE)
    bound_s = Settings(_env_file=None).tombstone_seconds
    kept_s = bound_s * TOMBSTONE_BUCKETS / (TOMBSTONE_BUCKETS - 1)
    print(f"machine: {machine()}; service ({args.workers} workers), Redis and load generator share it; load {os.getloadavg()}", flush=True)
    service = Service(workers=args.workers, **({"durability": args.durability} if args.durability else {}))
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the event loop the service runs on too
            result = runner.run(run(service, args))
    finally:
        service.stop()
    figures = figures_of(result, kept_s, args.rate) | {
        "load_average_end": str([round(x, 1) for x in os.getloadavg()]),
        "durability": args.durability or "default",
    }
    load = result.load
    checks = {
        f"every accepted request ended ({load.ended} of {load.inserted})": load.ended == load.inserted,
        f"tombstones within the bound at every sample {beyond_bound(result.samples, kept_s)}": not beyond_bound(result.samples, kept_s),
        **above_zero(figures, [name for name in HEADLINE if name != "mb_per_min_last_5_min"]),
    }
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
