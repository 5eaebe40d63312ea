"""Shared by the benchmarks: what users would run instead of goal management, on RQ. One queue per service class,
`SimpleWorker` processes listening to the queues in importance order (an RQ worker takes the first queue, in the
order given, that has a job: strict priority), each job sleeping its request's service time; either a fixed pool
of workers, or workers scaled by KEDA's Redis lists rule (bench/_keda.py) polled every `polling_s`. A scale-down
stops the newest workers with SIGTERM, RQ's warm shutdown: a busy worker finishes its job, then exits.

The arrivals are enqueued from this process at their times; each request's enqueue, start and end are RQ's own
(the job's `enqueued_at`, `started_at`, `ended_at`). The workers' lifetimes are watched as bench/_lifetimes.py
watches any server's, each run's found by its queues' names (on its workers' command lines): runs side by side
on one Redis are told apart.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
import rq
from _keda import Stabiliser, replicas_for
from _lifetimes import Lifetime, Lifetimes
from _service import RQ_SERIALIZER, RQ_START_SECONDS, await_rq_jobs
from _trace import Arrival
from rq.job import Job

from app.processes import die_with_parent

STOP_SECONDS = 30.0  # a worker told to stop has this long to finish its job before SIGKILL (Kubernetes' grace)


@dataclass(frozen=True)
class KedaRule:
    list_length: int
    polling_s: float
    down_window_s: float
    low: int
    high: int

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": "workers = clamp(ceil(queued / list_length), min, max), queued = the jobs waiting in all the class queues",
            "list_length": self.list_length,
            "polling_interval_s": self.polling_s,
            "scale_down_stabilisation_s": self.down_window_s,
            "scale_up": "at once to the rule's count",
            "min": self.low,
            "max": self.high,
            "scale_down_stops": "the newest workers, SIGTERM (RQ's warm shutdown: a busy worker finishes its job)",
        }


@dataclass
class RqRun:
    """One run: its trace's start (epoch), each request's (class, enqueued, started, ended) in epoch seconds
    (math.inf: never), the workers' lifetimes, each poll of a scaler (seconds after the start, queued, workers),
    and what was left unended after the drain."""

    start: float
    requests: list[tuple[str, float, float, float]]
    lifetimes: list[Lifetime]
    polls: list[tuple[float, int, int]] = field(default_factory=list)
    unended: int = 0


class WorkerPool:
    """RQ SimpleWorker processes on `queues` (in that order)."""

    def __init__(self, redis_url: str, queues: Sequence[str]) -> None:
        self.redis_url, self.queues = redis_url, list(queues)
        self.running: list[subprocess.Popen[bytes]] = []
        self.stopping: list[subprocess.Popen[bytes]] = []

    def start(self, count: int) -> None:
        for _ in range(count):
            command = [sys.executable, "-m", "rq.cli", "worker", "--url", self.redis_url, "--worker-class", "rq.worker.SimpleWorker",
                       "--serializer", RQ_SERIALIZER, "--quiet", *self.queues]  # fmt: skip
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
            self.running.append(process)

    def stop_newest(self, count: int) -> None:
        for _ in range(min(count, len(self.running))):
            process = self.running.pop()
            process.send_signal(signal.SIGTERM)
            self.stopping.append(process)
        self.stopping = [process for process in self.stopping if process.poll() is None]

    def await_listening(self, connection: redis.Redis, count: int) -> None:
        listening = rq.Queue(self.queues[0], connection=connection)
        deadline = time.monotonic() + RQ_START_SECONDS
        while rq.Worker.count(connection=connection, queue=listening) < count:
            if time.monotonic() > deadline or any(process.poll() is not None for process in self.running):
                raise RuntimeError(f"{count} RQ workers did not all start (one exited, or {RQ_START_SECONDS:g} s passed)")
            time.sleep(0.05)

    def close(self) -> None:
        self.stop_newest(len(self.running))
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.stopping:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.stopping.clear()


def _scale(pool: WorkerPool, queues: list[rq.Queue], rule: KedaRule, start: float, stop: threading.Event, polls: list) -> None:
    """KEDA's loop: every polling interval from the start, the rule's count for the jobs waiting, stabilised."""
    stabiliser = Stabiliser(rule.down_window_s)
    k = 0
    while not stop.wait(max(0.0, start + k * rule.polling_s - time.time())):
        queued = sum(queue.count for queue in queues)
        current = len(pool.running)
        wanted = stabiliser.replicas(time.monotonic(), replicas_for(queued, rule.list_length, rule.low, rule.high), current)
        if wanted > current:
            pool.start(wanted - current)
        elif wanted < current:
            pool.stop_newest(current - wanted)
        polls.append((round(time.time() - start, 2), queued, wanted))
        k += 1


def run_rq(
    redis_url: str,
    label: str,
    classes: Sequence[str],
    arrivals: Sequence[Arrival],
    length_s: float,
    workers: int | KedaRule,
    drain_s: float,
) -> RqRun:
    """The arrivals through one RQ queue per class of `classes` (in importance order; each named `label`-class) and
    `workers` workers (a count: a fixed pool; a KedaRule: scaled by it, from its minimum), then until every job ended
    (up to `drain_s`)."""
    connection = redis.Redis.from_url(redis_url)
    queues = [rq.Queue(f"{label}-{name}", connection=connection, serializer=RQ_SERIALIZER) for name in classes]
    for queue in queues:
        queue.empty()
    by_class = dict(zip(classes, queues, strict=True))
    pool = WorkerPool(redis_url, [queue.name for queue in queues])
    stop, polls = threading.Event(), []
    scaler: threading.Thread | None = None
    jobs: list[tuple[str, str]] = []
    # A worker's command line ends with its queues' names: this run's, and no other's.
    with Lifetimes(" ".join(pool.queues)) as lifetimes:
        try:
            pool.start(workers if isinstance(workers, int) else workers.low)
            pool.await_listening(connection, len(pool.running))
            start = time.time()
            if isinstance(workers, KedaRule):
                scaler = threading.Thread(target=_scale, args=(pool, queues, workers, start, stop, polls), name="keda", daemon=True)
                scaler.start()
            for arrival in arrivals:
                time.sleep(max(0.0, start + arrival.at_s - time.time()))
                job = by_class[arrival.service_class].enqueue("time.sleep", arrival.service_ms / 1000, result_ttl=3600)
                jobs.append((arrival.service_class, job.id))
            time.sleep(max(0.0, start + length_s - time.time()))
            unended = await_rq_jobs(connection, [job_id for _, job_id in jobs], drain_s)
        finally:
            stop.set()
            if scaler is not None:
                scaler.join()
            pool.close()
    requests = []
    for offset in range(0, len(jobs), 500):
        chunk = jobs[offset : offset + 500]
        fetched = Job.fetch_many([job_id for _, job_id in chunk], connection=connection, serializer=RQ_SERIALIZER)
        for (name, _), job in zip(chunk, fetched, strict=True):
            assert job is not None and job.enqueued_at is not None
            began, ended = job.started_at, job.ended_at
            requests.append(
                (
                    name,
                    job.enqueued_at.timestamp(),
                    began.timestamp() if began else float("inf"),
                    ended.timestamp() if ended else float("inf"),
                )
            )
    for queue in queues:
        queue.empty()
    connection.close()
    return RqRun(start, requests, lifetimes.lifetimes, polls, unended)
