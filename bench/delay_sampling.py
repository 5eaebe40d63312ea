"""What the elected scheduler's delay samples cost (issue 39: at most 5 % of one core for the scheduler's process and
Redis together at 10,000 class queues).

    .venv/bin/python bench/delay_sampling.py [--environments 3334] [--seconds 65] [--places N] [--idle-ticks 20]
    .venv/bin/python bench/delay_sampling.py --smoke     # 100 environments (300 class queues), 2 s, 4 idle ticks

bench/metrics_scrape.py's setup: the example policy with `--environments` application environments on one node (3
service classes each: 3 × 3,334 ≈ 10,000 class queues) and one request queued in every class queue (no server), in
the real app with its own Redis (embedded) and SQLite. The app runs no duties of its own: this process then runs the
sampling duty alone, as the scheduler does (a tick every WLM_SAMPLE_INTERVAL_MS, each reading WLM_SAMPLE_PLACES_PER_TICK
environments, or `--places`; the minutes written as they end), with what the goal evaluation adds every
WLM_GOAL_INTERVAL_SECONDS (each environment's shares over the window), for `--seconds` (65: a minute's rows written).
Its CPU is this process's, less the idle loop's (timed over --idle-ticks ticks first), and Redis's (its INFO, used
by nothing else), each as a share of one core: measured apart from the service's other duties, whose CPU on this
shared machine varies by more than the sampling's. Reported: both, their sum, the ticks run, and how often each class
queue was sampled (per minute). The last line is one JSON object of the figures (those named in HEADLINE among them)
and the checks that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.config import Settings
from app.main import create_app
from app.migrate import upgrade
from app.redis.embedded import EmbeddedRedis
from app.scheduler.duties.context import DutyContext
from app.scheduler.duties.delay_sampling import DelaySampling
from app.servers import delay_records
from app.servers.delay_samples import shares
from bench._service import ADMIN_KEY, machine
from bench._smoke import above_zero, conclude, parse_args
from bench.metrics_scrape import CLASSES, NODE, policy_of

HEADLINE = ("sampling_pct_of_core", "service_pct_of_core", "redis_pct_of_core", "samples_per_queue_minute")
SMOKE = {"environments": 100, "seconds": 2.0, "idle_ticks": 4}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def fill(client: httpx.AsyncClient, environments: int) -> None:
    """One request in each class queue of each environment, as bench/metrics_scrape.py queues them."""
    response = await client.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"], "permits": []})
    response.raise_for_status()
    key = (await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "qm"})).json()["key"]
    qm = {"Authorization": f"Bearer {key}"}
    body = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
    token = (await client.post("/v1/connections", headers=qm, json=body)).json()["token"]
    items = [{"classification": classification, "payload": {"sc": sc}} for sc, classification in CLASSES.items()]
    for n in range(environments):
        batch = {"connect_token": token, "application_environment": f"AE{n:05d}", "items": items}
        (await client.post("/v1/work:batch", headers=qm, json=batch)).raise_for_status()


def redis_cpu_s(info: dict[str, Any]) -> float:
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def measure(settings: Settings, environments: int, seconds: float, idle_ticks: int) -> dict[str, Any]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://wlm", timeout=60) as client:
            response = await client.put(
                "/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(policy_of(environments))
            )
            response.raise_for_status()
            await fill(client, environments)
        state = application.state.wlm
        sampler = DelaySampling(DutyContext(state, 1, "bench"))
        interval = settings.sample_interval_ms / 1000
        await sampler.sample_delays()  # warm: the scripts loaded, the places listed

        # The loop's own cost, sleeping as the duty does with nothing to do, is left out.
        idle_cpu = time.process_time()
        for _ in range(idle_ticks):
            await asyncio.sleep(interval)
        idle_per_tick = (time.process_time() - idle_cpu) / idle_ticks

        places = [keys for keys, _ in await DutyContext(state, 1, "bench").environments()]
        redis_before, cpu_before, began = redis_cpu_s(await state.queues.redis.info("cpu")), time.process_time(), time.monotonic()
        ticks, next_evaluation = 0, began
        while time.monotonic() - began < seconds:
            await sampler.sample_delays()
            ticks += 1
            if time.monotonic() >= next_evaluation:  # what the goal evaluation adds: each place's shares
                now_ms = await state.queues.clock_ms()
                for keys in places:
                    for counts in sampler.window(keys, now_ms).values():
                        shares(counts)
                next_evaluation += settings.goal_interval_seconds
            await asyncio.sleep(interval)
        elapsed = time.monotonic() - began
        service_s = time.process_time() - cpu_before - ticks * idle_per_tick
        redis_s = redis_cpu_s(await state.queues.redis.info("cpu")) - redis_before
        await sampler.write_at_stop()
    rows = delay_records.read(settings.delay_samples_dir).to_pylist()
    ticks_per_minute = ticks * 60 / elapsed
    sampled = [r for r in rows if r["period"] == 1 and r["node"] == NODE]
    return {
        "environments": environments,
        "class_queues": 3 * environments,
        "sample_interval_ms": settings.sample_interval_ms,
        "sample_places_per_tick": settings.sample_places_per_tick,
        "seconds": round(elapsed, 1),
        "ticks": ticks,
        "service_pct_of_core": round(100 * service_s / elapsed, 2),
        "redis_pct_of_core": round(100 * redis_s / elapsed, 2),
        "sampling_pct_of_core": round(100 * (service_s + redis_s) / elapsed, 2),
        "samples_per_queue_minute": round(ticks_per_minute * min(1.0, settings.sample_places_per_tick / environments), 1),
        "queues_in_rows": len({(r["application_environment"], r["service_class"]) for r in sampled if r["no_server"]}),
        "no_server_in_rows": sum(r["no_server"] for r in sampled),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--environments", type=int, default=3334, help="application environments, 3 class queues each")
    parser.add_argument("--seconds", type=float, default=65.0, help="how long the duty runs")
    parser.add_argument("--places", type=int, default=0, help="WLM_SAMPLE_PLACES_PER_TICK (default: the service's)")
    parser.add_argument("--idle-ticks", type=int, default=20, help="ticks of the idle loop timed first (its CPU is left out)")
    args = parse_args(parser, SMOKE)
    if args.idle_ticks < 1:
        parser.error("--idle-ticks must be 1 or more")
    print(f"machine: {machine()}; this process and its Redis share the cores with whatever else runs", flush=True)
    directory = Path(tempfile.mkdtemp(prefix="wlm-bench-delays-"))
    redis = EmbeddedRedis(directory / "redis")
    try:
        database = f"sqlite:///{directory / 'wlm.db'}"
        upgrade(database)
        places = {"sample_places_per_tick": args.places} if args.places else {}
        settings = Settings(
            data_dir=directory / "data",
            database_url=database,
            redis_url=redis.start(),
            bootstrap_admin_key=ADMIN_KEY,
            background_duties=False,
            launcher=False,
            max_policy_bytes=8_388_608,
            log_level="warning",
            **places,  # type: ignore[arg-type]
        )
        figures = asyncio.run(measure(settings, args.environments, args.seconds, args.idle_ticks))
    finally:
        redis.stop()
        shutil.rmtree(directory, ignore_errors=True)
    counted, queues = figures["queues_in_rows"], figures["class_queues"]
    checks = {
        f"every class queue holding a request had it counted waiting for a server ({counted} of {queues})": counted == queues,
        **above_zero(figures, ["service_pct_of_core", "samples_per_queue_minute", "no_server_in_rows"]),
    }
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
