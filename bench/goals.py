"""Goal-driven server management, end to end: two service classes compete for too few servers, then for enough.

    .venv/bin/python bench/goals.py [--short-seconds 60] [--ample-seconds 90] [--rate-factor 1] [--burn 0]
                                    [--attainment-interval 5]
    .venv/bin/python bench/goals.py --smoke     # --short-seconds 4 --ample-seconds 4 --rate-factor 0.5
                                                # --attainment-interval 1 --side-by-side: fewer checks

The real service runs (`wlm serve`, embedded Redis, SQLite, one worker) with its launcher on: it starts the
servers of the environment SIMAPP itself (`python -m app.examples.echo_server`, one worker task each, each request
taking the `delay_ms` its payload asks for) to the count its manager decides. This process is the load generator:
Poisson arrivals of two classes through one queue manager connection:
  FAST  importance 1, average response goal 500 ms,   15 requests/s of 100 ms  (offered load 1.5 servers)
  SLOW  importance 3, average response goal 2,000 ms,  10 requests/s of 200 ms  (offered load 2.0 servers)
(--rate-factor multiplies both rates.) Phase "short": server_limits max 3 — less than the 3.5 servers of load, so a
goal must give. Phase "ample": the
policy is reinstalled with max 10. At the end of each phase the PI of each class (over the manager's window) is
read from GET /v1/service-classes/{name}/performance. Then the peer: the same arrivals, through RQ (one FIFO queue, no goals) on the
service's Redis with as many SimpleWorker processes as the short phase's maximum (3), each job sleeping its
service time; its PI per class is the same average-goal PI over the same window, from RQ's enqueue and end times.
With --side-by-side (a smoke run's way) the peer runs beside the service's phases rather than after them, each
taking cores from the other.

--burn N runs N busy-loop processes (`python -c 'while True: pass'`, a core's worth of demand each) beside the whole
run, from before the service starts until after it stops (killed and waited for however the run ends; each also
dies with this process): the same run on a busy host, where the service, its servers and the manager get less of
the machine than they would alone.

Attainment: a PI read once at a phase's end says nothing of how long a class missed before it. So the benchmark
also judges each phase itself from the work records the service wrote (bench/_attainment.py): it cuts the phase
into intervals of --attainment-interval seconds from its start (those wholly inside it); a class's PI in an
interval is the mean response time (end - insert) of its requests that ended in that interval over its goal; an
interval in which the class had work queued or in flight but none ended is a miss; one without any work of the
class is left out. short_attainment_imp1 (…_imp3, ample_…) is the share of a class's counted intervals in that
phase whose PI is at most 1; the PIs of every interval are printed, one line per interval, before the last line.

The last line is one JSON object with short_pi_imp1, short_pi_imp3, ample_pi_imp1, ample_pi_imp3, the servers
the manager wanted in each phase, rq_short_pi_imp1 and rq_short_pi_imp3, and fifo_over_wlm_pi_imp1 (how many
times worse the importance-1 goal fares without goal management on the same servers), the four attainment figures
(with each one's intervals met and counted, and the interval's length), `burn`, `manager` (the goal interval, goal
window and lease check the service was started with), `manager_service_ms` (per phase and class, the mean execution
time the manager sized for, beside `asked_service_ms`: on a busy host it stretches) and `failed_checks`.

Checked, and the exit status 1 if not so: every insert was answered 201 and every accepted request has its
completion record (the servers finish the backlog after the load, up to DRAIN_SECONDS); every RQ job ended (up to
DRAIN_SECONDS after its phase); each PI above is a positive number (a phase goes on past its seconds, up to
PI_WAIT_SECONDS, until the manager has each PI it is checked on), each attainment a number from 0 to 1, and the
manager wanted servers in each phase.
Only when both phases last GOAL_CHECK_SECONDS (3 windows; the defaults do), so that the window at a phase's end
holds none of the phase before nor the servers' start: with too few servers the shortage falls on importance 3
(short_pi_imp1 below short_pi_imp3), importance 1 meets its goal all the same (short_pi_imp1 <= 1, and
short_attainment_imp1 >= SHORT_ATTAINMENT_IMP1: through the servers' start and the backlog too, on a busy host as on
a quiet one, since issue 35), with ample servers both goals are met (PI <= 1), and short_pi_imp3 is a number too.
A smoke run's phases are seconds: it does not check whether the goals are met (its PIs are mostly the launcher's
start), nor anything of RQ against WLM, and short_pi_imp3 may be null: the servers, still starting, serve importance
1 first, and no importance-3 request may have ended yet. It offers half the load (1.75 servers' worth), so that what
the servers still have to do when the arrivals stop, and RQ's backlog, take seconds rather than tens of them: its
short phase is short of servers only while they start. Its phases are cut into 1 s intervals, so that its attainment
figures are numbers too.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import math
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
import uvloop
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # the app, for bench/_records.py (after PYTHONPATH: ab.py's commit)
from _attainment import ClassAttainment, attainment
from _http import HttpClient
from _records import ends, without_record
from _service import ADMIN_KEY, RQ_SERIALIZER, Service, await_rq_jobs, machine, rq_workers
from _smoke import conclude, parse_args

from app.processes import die_with_parent

HEADLINE = (
    "short_pi_imp1",
    "short_pi_imp3",
    "ample_pi_imp1",
    "ample_pi_imp3",
    "rq_short_pi_imp1",
    "rq_short_pi_imp3",
    "short_attainment_imp1",
    "short_attainment_imp3",
    "ample_attainment_imp1",
    "ample_attainment_imp3",
)
ATTAINMENT_HEADLINE = tuple(name for name in HEADLINE if "_attainment_" in name)
ATTAINMENT_INTERVAL_SECONDS = 5.0
# A smoke run's phases are 4 s: 1 s intervals, so that its attainment figures are numbers too.
SMOKE = {"short_seconds": 4.0, "ample_seconds": 4.0, "rate_factor": 0.5, "attainment_interval": 1.0, "side_by_side": True}

CLASSES = {  # name: (userid that classifies to it, arrivals per second, service time in ms)
    "FAST": ("FAST01", 15.0, 100),
    "SLOW": ("SLOW01", 10.0, 200),
}
GOALS_MS = {"FAST": 500, "SLOW": 2000}  # average response time goals, as in the policy
IMPORTANCE = {"FAST": 1, "SLOW": 3}
# The manager's settings: passed to the service from here and named in the last line, so the two cannot differ.
GOAL_INTERVAL_SECONDS = 2
WINDOW_SECONDS = 20
LEASE_CHECK_SECONDS = 0.25
MANAGER = {
    "goal_interval_seconds": GOAL_INTERVAL_SECONDS,
    "goal_window_seconds": WINDOW_SECONDS,
    "lease_check_seconds": LEASE_CHECK_SECONDS,
}
GOAL_CHECK_SECONDS = 3 * WINDOW_SECONDS
# The share of the short phase's intervals in which importance 1 is to meet its goal (issue 35's target).
SHORT_ATTAINMENT_IMP1 = 0.8
DRAIN_SECONDS = 120.0
# How long a phase goes on past its seconds for the PIs it is checked on, and how often it looks.
PI_WAIT_SECONDS = 120.0
PI_LOOK_SECONDS = 0.25


def policy(max_servers: int) -> str:
    return json.dumps(
        {
            "name": "GOALSIM",
            "service_classes": [
                {"name": name, "importance": IMPORTANCE[name], "goal": {"type": "average", "response_time_ms": GOALS_MS[name]}}
                for name in CLASSES
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


class Inserts:
    def __init__(self) -> None:
        self.accepted: set[str] = set()
        self.refused: Counter[str] = Counter()  # by status, or the exception

    async def insert(self, qm: HttpClient, body: dict[str, object]) -> None:
        try:
            status, answer = await qm.post("/v1/work", body)
        except Exception as exc:
            self.refused[type(exc).__name__] += 1
            return
        if status == 201:
            self.accepted.add(answer["token"])
        else:
            self.refused[str(status)] += 1


async def arrivals(qm: HttpClient, token: str, name: str, rate: float, stop: asyncio.Event, inserts: Inserts) -> None:
    userid, _, service_ms = CLASSES[name]
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
        task = asyncio.create_task(inserts.insert(qm, body))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)


async def performance(admin: HttpClient) -> dict[str, dict[str, float | None]]:
    result = {}
    for name in CLASSES:
        status, body = await admin.request("GET", f"/v1/service-classes/{name}/performance")
        assert status == 200, body
        # Before the manager's first pass over the class there is no period yet: nothing measured.
        period = next((p for p in body["periods"] if p["period"] == 1), {})
        result[name] = {
            "pi": period.get("performance_index"),
            "avg_ms": period.get("avg_response_ms"),
            "exec_ms": period.get("avg_execution_ms"),
            "ended_per_s": period.get("ended_per_second"),
        }
    status, scaling = await admin.request("GET", "/v1/scaling/application-environments/SIMAPP")
    result["servers"] = {"desired": scaling["desiredServers"], "connected": scaling["connectedServers"]}
    return result


async def phase(
    admin: HttpClient, label: str, max_servers: int, seconds: float, measured: tuple[str, ...]
) -> tuple[dict[str, dict[str, float | None]], tuple[float, float]]:
    """The manager's view at the phase's end, and the phase's start and end on the wall clock (the epoch, as the
    work records' times), from which its attainment intervals are cut. The phase lasts `seconds`, and on until the
    manager has a PI for each class of `measured` (up to PI_WAIT_SECONDS more): a smoke run's seconds can pass on a
    busy host before the servers it starts have ended any request of a class."""
    await install(admin, max_servers)
    started, wall_start = time.monotonic(), time.time()
    while (left := started + seconds - time.monotonic()) > 0:
        await asyncio.sleep(min(5.0, left))
        seen = await performance(admin)
        line = "  ".join(f"{n} PI {seen[n]['pi'] if seen[n]['pi'] is None else round(seen[n]['pi'], 2)}" for n in CLASSES)
        print(f"{label:5} t+{time.monotonic() - started:3.0f}s  {line}  servers {seen['servers']}", flush=True)
    seen = await performance(admin)
    deadline = time.monotonic() + PI_WAIT_SECONDS
    while any(seen[name]["pi"] is None for name in measured) and time.monotonic() < deadline:
        await asyncio.sleep(PI_LOOK_SECONDS)
        seen = await performance(admin)
    if time.monotonic() - started > seconds + PI_LOOK_SECONDS:
        print(f"{label:5} went on to t+{time.monotonic() - started:.1f}s for a PI of each of {', '.join(measured)}", flush=True)
    return seen, (wall_start, time.time())


def attainments(
    requests: list[tuple[str, float, float]], phases: dict[str, tuple[float, float]], interval_s: float
) -> dict[str, dict[str, ClassAttainment]]:
    """Per phase, each class's intervals and attainment (bench/_attainment.py), each interval's PIs printed: a
    reader sees when a class missed, not only how often."""
    goals_s = {name: GOALS_MS[name] / 1000 for name in CLASSES}
    result = {}
    print(f"attainment: PI per {interval_s:g} s interval of the requests that ended in it (miss: work queued, none ended; "
          "-: no work, left out)", flush=True)  # fmt: skip
    for label, (start, end) in phases.items():
        result[label] = found = attainment(requests, goals_s, start, end, interval_s)
        for k, _ in enumerate(found[next(iter(CLASSES))].intervals):
            cells = []
            for name in CLASSES:
                interval = found[name].intervals[k]
                pi = "-" if interval.pi is None else "miss" if math.isinf(interval.pi) else f"{interval.pi:.2f}"
                cells.append(f"{name} PI {pi:>6} ({interval.ended:4} ended)")
            offset = found[next(iter(CLASSES))].intervals[k].offset_s
            span = f"{offset:g}-{offset + interval_s:g} s"
            print(f"{label:5} {span:>10}  {'  '.join(cells)}", flush=True)
        summary = "  ".join(f"{name} met {found[name].met} of {found[name].counted}" for name in CLASSES)
        print(f"{label:5} attainment: {summary}", flush=True)
    return result


def judges_goals(short_s: float, ample_s: float, rate_factor: float) -> bool:
    """Whether a run judges the goals: on the load the policy was made for, over phases long enough to judge."""
    return min(short_s, ample_s) >= GOAL_CHECK_SECONDS and rate_factor == 1


async def main_async(service: Service, short_s: float, ample_s: float, rate_factor: float, interval_s: float) -> dict[str, Any]:
    admin = HttpClient(service.url, ADMIN_KEY)
    await install(admin, 3)
    await admin.post("/v1/principals", {"name": "sim-qm", "roles": ["queue_manager"]})
    key = (await admin.post("/v1/api-keys", {"principal": "sim-qm"}))[1]["key"]
    qm = HttpClient(service.url, key)
    status, body = await qm.post("/v1/connections", {"role": "queue_manager", "subsystem_type": "SIM", "subsystem_name": "SIM1"})
    assert status == 201, body
    gc.freeze()
    stop, inserts = asyncio.Event(), Inserts()
    load = [asyncio.create_task(arrivals(qm, body["token"], name, CLASSES[name][1] * rate_factor, stop, inserts)) for name in CLASSES]
    # The PIs each phase is checked on (main): the short phase's importance 3 only on phases long enough to judge.
    judged = judges_goals(short_s, ample_s, rate_factor)
    short, short_bounds = await phase(admin, "short", 3, short_s, tuple(CLASSES) if judged else ("FAST",))
    ample, ample_bounds = await phase(admin, "ample", 10, ample_s, tuple(CLASSES))
    stop.set()
    await asyncio.gather(*load)
    # The launched servers take the backlog, then their records are written.
    drain_started = time.monotonic()
    unrecorded = await without_record(service.dir / "data", inserts.accepted, DRAIN_SECONDS)
    print(f"drained: {len(inserts.accepted) - len(unrecorded)} of {len(inserts.accepted)} accepted requests recorded "
          f"{time.monotonic() - drain_started:.1f} s after the load", flush=True)  # fmt: skip
    await qm.close()
    await admin.close()
    requests = await asyncio.to_thread(ends, service.dir / "data", "SIMAPP")
    found = attainments(requests, {"short": short_bounds, "ample": ample_bounds}, interval_s)
    shares = {f"{label}_attainment_imp{IMPORTANCE[name]}": found[label][name].share for label in ("short", "ample") for name in CLASSES}
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
        # The service time the manager sized for (its window's mean execution), beside the one each request asked for:
        # on a busy host the servers' execution stretches, and the manager sizes for what it sees.
        "manager_service_ms": {
            label: {name: None if seen[name]["exec_ms"] is None else round(seen[name]["exec_ms"], 1) for name in CLASSES}
            for label, seen in (("short", short), ("ample", ample))
        },
        "asked_service_ms": {name: CLASSES[name][2] for name in CLASSES},
        "accepted": len(inserts.accepted),
        "refused": dict(inserts.refused),
        "without_record": len(unrecorded),
        **{key: None if value is None else round(value, 3) for key, value in shares.items()},
        "attainment_interval_s": interval_s,
        "attainment_met_of_counted": {
            f"{label}_imp{IMPORTANCE[name]}": [found[label][name].met, found[label][name].counted]
            for label in ("short", "ample")
            for name in CLASSES
        },
    }


def rq_fifo_phase(redis_url: str, workers: int, seconds: float, rate_factor: float) -> dict[str, float | None]:
    """The same Poisson arrivals through one RQ queue (FIFO, no goals) and `workers` SimpleWorkers; the average-goal
    PI of each class over the requests that ended in the last WINDOW_SECONDS, as the service judges its own."""
    connection = redis.Redis.from_url(redis_url)
    queue = Queue("goals-fifo", connection=connection, serializer=RQ_SERIALIZER)
    queue.empty()
    jobs: dict[str, list[str]] = {name: [] for name in CLASSES}
    rates = {name: CLASSES[name][1] * rate_factor for name in CLASSES}
    with rq_workers(redis_url, "goals-fifo", workers):
        next_at = {name: time.perf_counter() + random.expovariate(rates[name]) for name in CLASSES}
        deadline = time.perf_counter() + seconds
        while (now := time.perf_counter()) < deadline:
            name = min(next_at, key=next_at.__getitem__)
            time.sleep(max(0.0, next_at[name] - now))
            jobs[name].append(queue.enqueue("time.sleep", CLASSES[name][2] / 1000, result_ttl=3600).id)
            next_at[name] += random.expovariate(rates[name])
        window_start = time.time() - WINDOW_SECONDS
        result: dict[str, float | None] = {}
        for name, ids in jobs.items():
            ended = [job for job in Job.fetch_many(ids, connection=connection, serializer=RQ_SERIALIZER) if job and job.ended_at]
            responses = [
                (job.ended_at - job.enqueued_at).total_seconds() * 1000 for job in ended if job.ended_at.timestamp() >= window_start
            ]
            result[name] = round(sum(responses) / len(responses) / GOALS_MS[name], 3) if responses else None
            result[f"{name}_queued_at_end"] = len(ids) - len(ended)
        unended = await_rq_jobs(connection, [job_id for ids in jobs.values() for job_id in ids], DRAIN_SECONDS)
        result |= {"unended": unended, "failed": FailedJobRegistry(queue=queue).count}
    queue.empty()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short-seconds", type=float, default=60.0)
    parser.add_argument("--ample-seconds", type=float, default=90.0)
    parser.add_argument("--rate-factor", type=float, default=1.0, help="both classes' arrival rates times this")
    parser.add_argument("--burn", type=int, default=0, metavar="N", help="N busy-loop processes beside the whole run")
    parser.add_argument(
        "--attainment-interval", type=float, default=ATTAINMENT_INTERVAL_SECONDS, help="seconds per interval of the attainment figures"
    )
    parser.add_argument("--side-by-side", action="store_true", help="run the RQ peer beside the service's phases, not after them")
    args = parse_args(parser, SMOKE)
    if args.burn < 0 or args.attainment_interval <= 0:
        parser.error("--burn must be 0 or more, --attainment-interval above 0")
    print(f"machine: {machine()}; service (1 worker), its Redis, the servers it starts and this load generator share it", flush=True)
    with burning(args.burn):
        service = Service(workers=1, launcher="true", **{setting: str(value) for setting, value in MANAGER.items()})
        try:
            with ThreadPoolExecutor(1) as beside, asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                fifo = functools.partial(
                    rq_fifo_phase, service.redis_url, workers=3, seconds=args.short_seconds, rate_factor=args.rate_factor
                )
                early = beside.submit(fifo) if args.side_by_side else None
                phases = main_async(service, args.short_seconds, args.ample_seconds, args.rate_factor, args.attainment_interval)
                figures = runner.run(phases)
                # One after another, the peer gets the machine's cores: the servers the service launched end with its load.
                peer = early.result() if early else fifo()
            print(
                f"rq fifo, 3 workers: FAST PI {peer['FAST']}  SLOW PI {peer['SLOW']}  (still queued at the end: "
                f"FAST {peer['FAST_queued_at_end']}, SLOW {peer['SLOW_queued_at_end']})",
                flush=True,
            )
        finally:
            service.stop()
    figures |= {"rq_short_pi_imp1": peer["FAST"], "rq_short_pi_imp3": peer["SLOW"], "rq_side_by_side": args.side_by_side}
    figures |= {"burn": args.burn, "manager": MANAGER}
    if peer["FAST"] is not None and figures["short_pi_imp1"]:
        figures["fifo_over_wlm_pi_imp1"] = round(peer["FAST"] / figures["short_pi_imp1"], 1)  # type: ignore[operator]
    checks = {
        "every insert answered 201": not figures["refused"],
        f"every accepted request has its completion record within {DRAIN_SECONDS:g} s": figures["without_record"] == 0,
        f"every RQ job ended within {DRAIN_SECONDS:g} s, none failed": peer["unended"] == 0 and peer["failed"] == 0,
        "the manager wanted servers in each phase": all(positive(figures[f"{label}_servers"]["desired"]) for label in ("short", "ample")),
    }
    full_length = judges_goals(args.short_seconds, args.ample_seconds, args.rate_factor)
    checks |= {
        f"{name} is a positive number": positive(figures[name])
        for name in HEADLINE
        if name not in ATTAINMENT_HEADLINE and (full_length or name != "short_pi_imp3")
    }
    checks |= {f"{name} is a number from 0 to 1": share(figures[name]) for name in ATTAINMENT_HEADLINE}
    if full_length:
        imp1, imp3 = figures["short_pi_imp1"], figures["short_pi_imp3"]
        checks |= {
            "with too few servers, importance 3 fares worse than importance 1": positive(imp1) and positive(imp3) and imp1 < imp3,
            "with too few servers, importance 1 meets its goal": met(imp1),
            f"with too few servers, importance 1 meets its goal in {SHORT_ATTAINMENT_IMP1:.0%} of the intervals": (
                share(figures["short_attainment_imp1"]) and figures["short_attainment_imp1"] >= SHORT_ATTAINMENT_IMP1
            ),
            "importance 1 meets its goal with ample servers": met(figures["ample_pi_imp1"]),
            "importance 3 meets its goal with ample servers": met(figures["ample_pi_imp3"]),
        }
    conclude(figures, checks, args.smoke)


def positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0


def share(value: object) -> bool:
    return isinstance(value, int | float) and 0 <= value <= 1


BURN_CODE = "while True: pass"


@contextmanager
def burning(count: int) -> Iterator[None]:
    """`count` busy-loop processes (`python -c 'while True: pass'`, each a core's worth of demand) for the body:
    killed and waited for however it ends (an error, Ctrl-C); each also gets SIGTERM should this process die
    without its `finally` (kill -9)."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", BURN_CODE], preexec_fn=die_with_parent))
        if procs:
            print(f"burn: {count} busy-loop processes beside the run (pids {', '.join(str(p.pid) for p in procs)})", flush=True)
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def met(pi: object) -> bool:
    """A performance index at or under 1: the goal met."""
    return isinstance(pi, int | float) and pi <= 1


if __name__ == "__main__":
    main()
