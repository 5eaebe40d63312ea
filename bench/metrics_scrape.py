"""What a Prometheus scrape of /metrics costs with many queues: the queues' figures are served as the elected
scheduler last rendered them, kept deflated in Redis (app/health/exposition.py), so every replica answers alike.

    .venv/bin/python bench/metrics_scrape.py [--environments 3334] [--scrapes 20] [--no-gzip] [--metrics-max-age S]
    .venv/bin/python bench/metrics_scrape.py --smoke     # seconds: 100 environments (300 class queues), 10 scrapes,
                                                         # --metrics-max-age 2

It starts the real service (`wlm serve`, 2 workers, embedded Redis), installs the example policy with
`--environments` application environments on one node (3 service classes each: 3 × 3,334 ≈ 10,000 class
queues), queues one request in every class queue, scrapes /metrics until it serves the scheduler's rendering (the
first scrape asks for it, the scheduler renders every half of WLM_METRICS_MAX_AGE_SECONDS, --metrics-max-age, by
default the goal interval of 10 s; the steady state of a scraped service), then `--scrapes` times in a row, accepting gzip as
Prometheus does (`--no-gzip`: as a client that does not; the text is then inflated by the service). Beside it, in
the same run, the peer: raw Redis, the same Redis read by redis-py with nothing else (one pipelined HGETALL of every
environment's depth hash), the least any scrape of those depths could cost.

Reported: the scrape's wall time (median and worst), the CPU the service and its Redis used per scrape (the
scheduler's renderings within those scrapes included), the exposition's size and the bytes on the wire, the raw
read's time and the ratio. The service, its Redis and this load generator share the machine's cores. Every run
checks that the scrape and the raw read each saw every class queue holding its one request, that the scheduler's
rendering was served, that no process of the service ended, and that the figures are above 0 but Redis's CPU (it is
counted in ticks of 10 ms, and Redis's part of a served rendering is one read: it can use none in a run); a failed
check makes the exit status 1. The last line is one JSON object of the
figures (those named in HEADLINE among them), the checks that failed and whether this was a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from pathlib import Path

import httpx
import redis

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.queues.keys import AeKeys
from bench._service import Service, admin_setup, example_policy, machine, process_tree
from bench._smoke import above_zero, conclude, parse_args

HEADLINE = (
    "scrape_ms_median",
    "scrape_ms_max",
    "service_cpu_ms_per_scrape",
    "redis_cpu_ms_per_scrape",
    "exposition_bytes",
    "raw_redis_depths_ms",
    "scrape_vs_raw_redis",
)
# A smoke run's rendering is asked for every second, not every 5 s: up to 4 s less waiting for the first one.
SMOKE = {"environments": 100, "scrapes": 10, "metrics_max_age": 2.0}
PREFIX = "wlm"  # the service's default WLM_REDIS_PREFIX
NODE = "LOCAL"  # the policy's only node
CLASSES = {"ONLINE": {"userid": "ATM01"}, "BATCH": {"userid": "BOB"}, "REPORTS": {"transaction_class": "RPT1"}}
CONCURRENCY = 16
# A scrape marks the scheduler's rendering wanted; it is served from the scheduler's next pass (every half goal
# interval, app/health/exposition.py) on.
STORED = "\nwlm_queue_metrics_stored 1\n"
STORED_WAIT_S = 60


def policy_of(environments: int) -> dict:
    document = example_policy()
    [template] = document["application_environments"]
    document["application_environments"] = [{**template, "name": _name(n)} for n in range(environments)]
    return document


def _name(n: int) -> str:
    return f"AE{n:05d}"


async def fill(url: str, qm_key: str, environments: int) -> None:
    """One request in each class queue of each environment: a batch of three per environment."""
    headers = {"Authorization": f"Bearer {qm_key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        connection = await client.post("/v1/connections", json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"})
        connection.raise_for_status()
        token = connection.json()["token"]
        items = [{"classification": classification, "payload": {"sc": sc}} for sc, classification in CLASSES.items()]
        pending = iter(range(environments))

        async def producer() -> None:
            for n in pending:
                answer = await client.post(
                    "/v1/work:batch", json={"connect_token": token, "application_environment": _name(n), "items": items}
                )
                answer.raise_for_status()

        await asyncio.gather(*(producer() for _ in range(CONCURRENCY)))


def scrape(url: str, times: int, service: Service, gzip: bool = True) -> dict[str, float]:
    walls: list[float] = []
    size = wire = 0
    headers = {} if gzip else {"Accept-Encoding": "identity"}
    with httpx.Client(base_url=url, timeout=120, headers=headers) as client:
        text = client.get("/metrics").text  # warm: the scripts loaded, the policy cached; and the rendering wanted
        holding_one = len(re.findall(rf'^wlm_queue_depth\{{application_environment="AE\d+",node="{NODE}",[^}}]*\}} 1(?:\.0)?$', text, re.M))
        # The steady state: the elected scheduler's rendering served (it renders once a scrape wanted it).
        deadline = time.monotonic() + STORED_WAIT_S
        while not (stored := STORED in client.get("/metrics").text) and time.monotonic() < deadline:
            time.sleep(0.5)
        before = service.cpu_seconds()
        for _ in range(times):
            started = time.perf_counter()
            response = client.get("/metrics")
            walls.append(time.perf_counter() - started)
            response.raise_for_status()
            size, wire = len(response.content), response.num_bytes_downloaded
        used = (service.cpu_seconds() - before).per(times)
    return {
        "scrape_ms_median": round(1000 * statistics.median(walls), 1),
        "scrape_ms_max": round(1000 * max(walls), 1),
        "service_cpu_ms_per_scrape": round(used.service, 1),
        "redis_cpu_ms_per_scrape": round(used.redis, 1),
        "exposition_bytes": size,
        "wire_bytes": wire,
        "served_stored": stored,
        "class_queues_scraped": holding_one,
    }


def raw_depths(redis_url: str, environments: int, times: int) -> tuple[float, int]:
    """The peer: every environment's depth hash in one pipeline, the median of `times` reads (ms); and how many
    environments it found holding one request in each class queue."""
    walls = []
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        for _ in range(times):
            started = time.perf_counter()
            pipe = client.pipeline(transaction=False)
            for n in range(environments):
                pipe.hgetall(AeKeys(PREFIX, NODE, _name(n)).depth)
            depths = pipe.execute()
            walls.append(time.perf_counter() - started)
    return 1000 * statistics.median(walls), sum(depth == dict.fromkeys(CLASSES, "1") for depth in depths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--environments", type=int, default=3334, help="application environments, 3 class queues each")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--no-gzip", action="store_true", help="scrape as a client that does not accept gzip would")
    parser.add_argument("--metrics-max-age", type=float, help="WLM_METRICS_MAX_AGE_SECONDS (default: the service's)")
    args = parse_args(parser, SMOKE)
    print(f"machine: {machine()}; the service (2 workers), its Redis and this load generator share the cores", flush=True)
    max_age = {} if args.metrics_max_age is None else {"metrics_max_age_seconds": str(args.metrics_max_age)}
    service = Service(workers=2, max_policy_bytes="8388608", **max_age)
    try:
        qm_key, _ = asyncio.run(admin_setup(service.url, policy_of(args.environments)))
        # uvicorn's supervisor kills a worker that does not answer its health check and says so only at INFO,
        # below the service's log level here: a killed worker's clients see their connections reset.
        processes = set(process_tree(service.process.pid))
        started = time.perf_counter()
        asyncio.run(fill(service.url, qm_key, args.environments))
        print(f"queued {3 * args.environments:,} requests in {time.perf_counter() - started:.1f} s", flush=True)
        figures = scrape(service.url, args.scrapes, service, gzip=not args.no_gzip)
        print(f"scrape: {figures}", flush=True)
        raw_ms, raw_environments = raw_depths(service.redis_url, args.environments, args.scrapes)
        gone = processes - set(process_tree(service.process.pid))
        print(f"raw Redis: every depth hash in one pipeline, {raw_ms:.1f} ms", flush=True)
    finally:
        service.stop()
    figures |= {
        "metrics_max_age_s": args.metrics_max_age,
        "environments": args.environments,
        "class_queues": 3 * args.environments,
        "raw_redis_depths_ms": round(raw_ms, 1),
        "scrape_vs_raw_redis": round(figures["scrape_ms_median"] / raw_ms, 1),
    }
    scraped, queues = figures["class_queues_scraped"], figures["class_queues"]
    checks = {
        f"the scrape saw each class queue hold its request ({scraped} of {queues})": scraped == queues,
        f"the raw read saw each environment's ({raw_environments} of {args.environments})": raw_environments == args.environments,
        "the scrapes served the scheduler's rendering": figures["served_stored"],
        f"no process of the service ended (ended: {sorted(gone)})": not gone,
        # Redis's part of a scrape served from the scheduler's rendering is one read of ~300 KB: often no tick of
        # 10 ms in all of a run's scrapes, so a 0 there measured something.
        **above_zero(figures, [name for name in HEADLINE if name != "redis_cpu_ms_per_scrape"]),
    }
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
