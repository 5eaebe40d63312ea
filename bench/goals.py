"""Goal-driven server management, end to end: two service classes compete for too few servers, then for enough.

    .venv/bin/python bench/goals.py [--short-seconds 60] [--ample-seconds 90]

The real service runs (`wlm serve`, embedded Redis, SQLite, one worker) with its launcher on: it starts the
servers of the environment SIMAPP itself (`python -m app.examples.echo_server`, one worker task each, each request
taking the `delay_ms` its payload asks for) to the count its manager decides. This process is the load generator:
Poisson arrivals of two classes through one queue manager connection:
  FAST  importance 1, average response goal 500 ms,   15 requests/s of 100 ms  (offered load 1.5 servers)
  SLOW  importance 3, average response goal 2,000 ms,  10 requests/s of 200 ms  (offered load 2.0 servers)
Phase "short": server_limits max 3 — less than the 3.5 servers of load, so a goal must give. Phase "ample": the
policy is reinstalled with max 10. At the end of each phase the PI of each class (over the manager's window) is
read from GET /v1/service-classes/{name}/performance. Then the peer: the same arrivals, through RQ (one FIFO queue, no goals) on the
service's Redis with as many SimpleWorker processes as the short phase's maximum (3), each job sleeping its
service time; its PI per class is the same average-goal PI over the same window, from RQ's enqueue and end times.
The last line is one JSON object with short_pi_imp1, short_pi_imp3, ample_pi_imp1, ample_pi_imp3, the servers
the manager wanted in each phase, rq_short_pi_imp1 and rq_short_pi_imp3, and fifo_over_wlm_pi_imp1 (how many
times worse the importance-1 goal fares without goal management on the same servers).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from pathlib import Path

import redis
import uvloop
from rq import Queue
from rq.job import Job

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import HttpClient
from _service import ADMIN_KEY, RQ_SERIALIZER, Service, machine, rq_workers

CLASSES = {  # name: (userid that classifies to it, arrivals per second, service time in ms)
    "FAST": ("FAST01", 15.0, 100),
    "SLOW": ("SLOW01", 10.0, 200),
}
GOALS_MS = {"FAST": 500, "SLOW": 2000}  # average response time goals, as in the policy
WINDOW_SECONDS = 20


def policy(max_servers: int) -> str:
    return json.dumps(
        {
            "name": "GOALSIM",
            "service_classes": [
                {"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": GOALS_MS["FAST"]}},
                {"name": "SLOW", "importance": 3, "goal": {"type": "average", "response_time_ms": GOALS_MS["SLOW"]}},
            ],
            "classification": [
                {
                    "subsystem_type": "SIM",
                    "default_service_class": "SLOW",
                    "rules": [{"qualifier": "UI", "value": "FAST*", "service_class": "FAST"}],
                }
            ],
            "application_environments": [
                {
                    "name": "SIMAPP",
                    "subsystem_type": "SIM",
                    "start_command": [sys.executable, "-m", "app.examples.echo_server"],
                    "server_limits": {"min": 1, "max": max_servers},
                    "completion_time_ms": 60000,
                }
            ],
        }
    )


async def install(admin: HttpClient, max_servers: int) -> None:
    status, body = await admin.request("PUT", "/v1/policy", policy(max_servers))
    assert status == 200, body


async def arrivals(qm: HttpClient, token: str, name: str, stop: asyncio.Event) -> None:
    userid, rate, service_ms = CLASSES[name]
    body = {
        "connect_token": token,
        "application_environment": "SIMAPP",
        "classification": {"userid": userid},
        "payload": {"delay_ms": service_ms},
    }
    pending: set[asyncio.Task[object]] = set()
    next_at = time.perf_counter()
    while not stop.is_set():
        next_at += random.expovariate(rate)
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        task = asyncio.create_task(qm.post("/v1/work", body))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)


async def performance(admin: HttpClient) -> dict[str, dict[str, float | None]]:
    result = {}
    for name in CLASSES:
        status, body = await admin.request("GET", f"/v1/service-classes/{name}/performance")
        assert status == 200, body
        (period,) = [p for p in body["periods"] if p["period"] == 1]
        result[name] = {"pi": period["performance_index"], "avg_ms": period["avg_response_ms"], "ended_per_s": period["ended_per_second"]}
    status, scaling = await admin.request("GET", "/v1/scaling/application-environments/SIMAPP")
    result["servers"] = {"desired": scaling["desiredServers"], "connected": scaling["connectedServers"]}
    return result


async def phase(admin: HttpClient, label: str, max_servers: int, seconds: float) -> dict[str, dict[str, float | None]]:
    await install(admin, max_servers)
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        await asyncio.sleep(5)
        seen = await performance(admin)
        line = "  ".join(f"{n} PI {seen[n]['pi'] if seen[n]['pi'] is None else round(seen[n]['pi'], 2)}" for n in CLASSES)
        print(f"{label:5} t+{time.monotonic() - started:3.0f}s  {line}  servers {seen['servers']}", flush=True)
    return await performance(admin)


async def main_async(service: Service, short_s: float, ample_s: float) -> dict[str, object]:
    admin = HttpClient(service.url, ADMIN_KEY)
    await install(admin, 3)
    await admin.post("/v1/principals", {"name": "sim-qm", "roles": ["queue_manager"]})
    key = (await admin.post("/v1/api-keys", {"principal": "sim-qm"}))[1]["key"]
    qm = HttpClient(service.url, key)
    status, body = await qm.post("/v1/connections", {"role": "queue_manager", "subsystem_type": "SIM", "subsystem_name": "SIM1"})
    assert status == 201, body
    gc.freeze()
    stop = asyncio.Event()
    load = [asyncio.create_task(arrivals(qm, body["token"], name, stop)) for name in CLASSES]
    short = await phase(admin, "short", 3, short_s)
    ample = await phase(admin, "ample", 10, ample_s)
    stop.set()
    await asyncio.gather(*load)
    await qm.close()
    await admin.close()
    return {
        "short_pi_imp1": short["FAST"]["pi"],
        "short_pi_imp3": short["SLOW"]["pi"],
        "ample_pi_imp1": ample["FAST"]["pi"],
        "ample_pi_imp3": ample["SLOW"]["pi"],
        "short_avg_ms_imp1": short["FAST"]["avg_ms"],
        "short_avg_ms_imp3": short["SLOW"]["avg_ms"],
        "ample_avg_ms_imp1": ample["FAST"]["avg_ms"],
        "ample_avg_ms_imp3": ample["SLOW"]["avg_ms"],
        "short_servers": short["servers"],
        "ample_servers": ample["servers"],
    }


def rq_fifo_phase(redis_url: str, workers: int, seconds: float) -> dict[str, float | None]:
    """The same Poisson arrivals through one RQ queue (FIFO, no goals) and `workers` SimpleWorkers; the average-goal
    PI of each class over the requests that ended in the last WINDOW_SECONDS, as the service judges its own."""
    connection = redis.Redis.from_url(redis_url)
    queue = Queue("goals-fifo", connection=connection, serializer=RQ_SERIALIZER)
    queue.empty()
    jobs: dict[str, list[str]] = {name: [] for name in CLASSES}
    with rq_workers(redis_url, "goals-fifo", workers):
        next_at = {name: time.perf_counter() + random.expovariate(CLASSES[name][1]) for name in CLASSES}
        deadline = time.perf_counter() + seconds
        while (now := time.perf_counter()) < deadline:
            name = min(next_at, key=next_at.__getitem__)
            time.sleep(max(0.0, next_at[name] - now))
            jobs[name].append(queue.enqueue("time.sleep", CLASSES[name][2] / 1000, result_ttl=3600).id)
            next_at[name] += random.expovariate(CLASSES[name][1])
        window_start = time.time() - WINDOW_SECONDS
        result: dict[str, float | None] = {}
        for name, ids in jobs.items():
            ended = [job for job in Job.fetch_many(ids, connection=connection, serializer=RQ_SERIALIZER) if job and job.ended_at]
            responses = [
                (job.ended_at - job.enqueued_at).total_seconds() * 1000 for job in ended if job.ended_at.timestamp() >= window_start
            ]
            result[name] = round(sum(responses) / len(responses) / GOALS_MS[name], 3) if responses else None
            result[f"{name}_queued_at_end"] = len(ids) - len(ended)
    queue.empty()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short-seconds", type=float, default=60.0)
    parser.add_argument("--ample-seconds", type=float, default=90.0)
    args = parser.parse_args()
    print(f"machine: {machine()}; service (1 worker), its Redis, the servers it starts and this load generator share it", flush=True)
    service = Service(
        workers=1, launcher="true", goal_interval_seconds="2", goal_window_seconds=str(WINDOW_SECONDS), lease_check_seconds="0.25"
    )
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            figures = runner.run(main_async(service, args.short_seconds, args.ample_seconds))
        # The servers the service launched end with the ample phase's load; the peer gets the machine's cores.
        peer = rq_fifo_phase(service.redis_url, workers=3, seconds=args.short_seconds)
        print(
            f"rq fifo, 3 workers: FAST PI {peer['FAST']}  SLOW PI {peer['SLOW']}  (still queued at the end: "
            f"FAST {peer['FAST_queued_at_end']}, SLOW {peer['SLOW_queued_at_end']})",
            flush=True,
        )
    finally:
        service.stop()
    figures |= {"rq_short_pi_imp1": peer["FAST"], "rq_short_pi_imp3": peer["SLOW"]}
    if peer["FAST"] is not None and figures["short_pi_imp1"]:
        figures["fifo_over_wlm_pi_imp1"] = round(peer["FAST"] / figures["short_pi_imp1"], 1)  # type: ignore[operator]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
