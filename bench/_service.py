"""Shared by the benchmarks: start the real service (`wlm serve`, embedded Redis) in a scratch directory,
wait until it is ready, and stop it."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import redis
import rq
import yaml
from rq.job import Job

ROOT = Path(__file__).resolve().parent.parent
# bench/ab.py points this at another commit's `wlm` where that commit needs a venv of its own.
WLM = os.environ.get("WLM_BENCH_WLM") or str(Path(sys.executable).parent / "wlm")
ADMIN_KEY = "wlm_bench-admin-key-0123456789abcdefghijklmnopqrstuvwxyz"


EVERY_WORKER_SECONDS = 10.0


def listeners_on(port: int) -> int:
    """Sockets listening on this TCP port, of any process (Linux's /proc/net)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                local, state = row.split()[1], row.split()[3]
                count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port
    return count


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (Linux: /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


@dataclass(frozen=True)
class CpuSeconds:
    """CPU seconds (user + system) a service's processes used so far: Redis's, and the rest's (workers, supervisor,
    records writer)."""

    service: float
    redis: float

    def __sub__(self, other: CpuSeconds) -> CpuSeconds:
        return CpuSeconds(self.service - other.service, self.redis - other.redis)

    def per(self, count: int) -> CpuSeconds:
        """Milliseconds per one of `count` (lifecycles, requests)."""
        return CpuSeconds(1000 * self.service / max(count, 1), 1000 * self.redis / max(count, 1))

    def __str__(self) -> str:
        return f"service {self.service:.3f}, Redis {self.redis:.3f}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """One `wlm serve` process. `directory` and `port` (default: a new scratch directory, a free port) stay the
    same across `kill()` and `start()`, so a restarted replica keeps its data directory (its work records), its
    log (appended to) and its URL."""

    def __init__(
        self,
        workers: int = 1,
        *,
        directory: Path | None = None,
        port: int | None = None,
        redis_processes: tuple[int, ...] = (),
        **settings: str,
    ) -> None:
        """`redis_processes`: the pids of a Redis the service is given (WLM_REDIS_URL), whose CPU counts as its Redis's."""
        self.redis_processes = redis_processes
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="wlm-bench-"))
            # A run's service leaves its Redis's AOF and its records there (about 500 MB after bench/lifecycle.py):
            # gone when the benchmark ends, not piling up run after run (a benchmark may read them after stop()).
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.workers = workers
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")}
        self.env = env | {
            "WLM_DATA_DIR": str(self.dir / "data"),
            "WLM_PORT": str(self.port),
            "WLM_WORKERS": str(workers),
            "WLM_BOOTSTRAP_ADMIN_KEY": ADMIN_KEY,
            "WLM_LOG_LEVEL": "warning",
            "WLM_LAUNCHER": "false",  # a benchmark that wants servers started by the service says so
            **{f"WLM_{k.upper()}": v for k, v in settings.items()},
        }
        self.start()

    def start(self) -> None:
        """Start the process (again) and wait until it is ready."""
        self.log = (self.dir / "service.log").open("ab")
        self.process = subprocess.Popen([WLM, "serve"], cwd=self.dir, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    self._await_every_worker()
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the service did not start:\n" + (self.dir / "service.log").read_text(errors="replace"))

    def _await_every_worker(self) -> None:
        """Ready means one worker answers; a phase started then would open its connections before the other workers
        listen, and they would all land on that one. A service with a listener per worker (Linux) is waited for
        until each listens; one whose workers share a listener (an earlier commit, in bench/ab.py) is given
        EVERY_WORKER_SECONDS to start them all."""
        deadline = time.monotonic() + EVERY_WORKER_SECONDS
        while listeners_on(self.port) < self.workers and time.monotonic() < deadline:
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last words (its records writer process follows it on the parent-death signal)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()

    def cpu_seconds(self) -> CpuSeconds:
        """What the service's processes used so far (Linux: /proc), read before and after a phase: CPU per lifecycle
        varies far less with this machine's hour than lifecycles per second do."""
        ticks = os.sysconf("SC_CLK_TCK")
        service = redis = 0.0
        for pid in [*process_tree(self.process.pid), *self.redis_processes]:
            try:
                head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            fields = tail.split()
            used = (int(fields[11]) + int(fields[12])) / ticks
            if head.split("(", 1)[1] == "redis-server":
                redis += used
            else:
                service += used
        return CpuSeconds(service, redis)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{(self.dir / 'data' / 'redis' / 'redis.port').read_text().strip()}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def example_policy(**environment: object) -> dict:
    """examples/policy.yaml as a document, without start commands (the benchmarks start their own servers), each
    application environment's fields updated with `environment` (e.g. `completion_time_ms=2000`)."""
    document = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    for ae in document["application_environments"]:
        ae.pop("start_command", None)
        ae.update(environment)
    return document  # type: ignore[no-any-return]


async def admin_setup(url: str, policy: dict) -> tuple[str, str]:
    """Install `policy` and create two principals with a key each: `qm` (queue manager) and `srv` (server,
    permitted on CB.**). Returns their keys."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
        response = await admin.put("/v1/policy", content=json.dumps(policy), headers={"Content-Type": "application/json"})
        response.raise_for_status()
        keys = []
        for name, roles, permits in (("qm", ["queue_manager"], []), ("srv", ["server"], ["CB.**"])):
            (await admin.post("/v1/principals", json={"name": name, "roles": roles, "permits": permits})).raise_for_status()
            keys.append((await admin.post("/v1/api-keys", json={"principal": name})).json()["key"])
    return keys[0], keys[1]


def machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


RQ_SERIALIZER = "rq.serializers.JSONSerializer"
RQ_START_SECONDS = 60.0


def await_rq_jobs(connection: redis.Redis, job_ids: Sequence[str], deadline_s: float) -> int:
    """Wait until every job of `job_ids` has ended (RQ sets its `ended_at` as it finishes or fails), up to
    `deadline_s`; return how many had not. Counted from the jobs, not from the queue and the started registry: between
    a worker's dequeue and its start a job is in neither, and a count of those two ends the wait early."""
    pending, deadline = list(job_ids), time.monotonic() + deadline_s
    while True:
        with connection.pipeline(transaction=False) as pipeline:
            for job_id in pending:
                pipeline.hget(Job.key_for(job_id), "ended_at")
            ended = pipeline.execute()
        pending = [job_id for job_id, at in zip(pending, ended, strict=True) if not at]
        if not pending or time.monotonic() > deadline:
            return len(pending)
        time.sleep(0.2)


@contextmanager
def rq_workers(redis_url: str, queue: str, count: int) -> Iterator[None]:
    """`count` RQ SimpleWorker processes on `queue`, started (each registered in Redis, so the clock starts on workers
    that listen) before the body, stopped after it."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rq.cli", "worker", "--url", redis_url, "--worker-class", "rq.worker.SimpleWorker",
             "--serializer", RQ_SERIALIZER, "--quiet", queue],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]  # fmt: skip
    try:
        with redis.Redis.from_url(redis_url) as connection:
            listening = rq.Queue(queue, connection=connection)
            deadline = time.monotonic() + RQ_START_SECONDS
            while rq.Worker.count(connection=connection, queue=listening) < count:
                if time.monotonic() > deadline or any(proc.poll() is not None for proc in procs):
                    raise RuntimeError(f"{count} RQ workers did not all start (one exited, or {RQ_START_SECONDS:g} s passed)")
                time.sleep(0.05)
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
