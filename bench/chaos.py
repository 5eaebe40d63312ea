"""Chaos under load: replicas, servers and Redis killed with SIGKILL; a host crash in both durability modes; what
strict durability costs an insert (issue 20).

    .venv/bin/python bench/chaos.py [--seconds 5] [--requests 2000] [--pairs 3] [--only 1,2,3] [--side-by-side]
    .venv/bin/python bench/chaos.py --smoke     # seconds and tiny sizes (--help lists them): every scenario, every check

Everything runs on this machine (127.0.0.1 only) and is stopped at the end, also on failure or Ctrl-C: its own
redis-server processes, `wlm serve` replicas (bench/_service.py), server processes, and a fresh PostgreSQL database
(dropped after) when one answers at --postgres, else one SQLite file.

1. Two replicas on one Redis under load (--durability, default strict: appendfsync always). 4 producers insert
   --requests requests spread over 4 x --seconds, through both replicas; --servers (8) processes long-poll select
   (`begin: true`), work --work-ms and end (with their next select). Each server logs every delivery and end to a
   file. During the load, one after the other, --seconds apart: the replica holding the scheduler's role
   (GET /v1/scheduler) is killed -9 and restarted; a server is killed -9 while its handler holds a request (that
   request must come back on lease expiry and be ended by another server); Redis is killed -9 and restarted on the
   same AOF (the replicas must recover by themselves). Then every accepted request must end, and its work record
   be written.
2. Host crash, in fast (appendfsync everysec) and strict (always) mode: one replica, 4 producers inserting single
   requests flat out for --seconds, no servers. Halfway, Redis is killed -9 and each AOF file cut back to its last
   fsync, as a power loss leaves it: an LD_PRELOAD shim (compiled here with gcc) logs, for each fsync/fdatasync of
   a file in Redis's directory, the file's size before the call; `*.incr.aof` files (written by appends) are cut
   to the largest size logged for them, 0 if never fsynced (base and manifest files are written to a temporary
   name, fsynced and renamed: left whole). Redis restarts on that; then every insert answered 201 is looked for in
   Redis (the request's hash entry): those missing are lost.
3. Insert cost of strict: single-request inserts per second (4 producers flat out, no servers) on a fast and a
   strict deployment (each its own Redis and replica, both up throughout), measured interleaved, --pairs times
   (fast then strict, then strict then fast, ...), each phase --seconds after 0.5 s of warm-up; cost = (fast rate /
   strict rate - 1) x 100 per pair, the median over pairs. The same for batches of 100 (POST /v1/work:batch).

The last stdout line is one JSON object, the details of each scenario under `scenarios`, and `failed_checks`;
progress goes to stderr. A failed check makes the exit status 1: a scenario that did not run to its end; in
scenario 1 no request accepted, one lost, run twice, without its work record or with a negative duration, a duty
failure outside the Redis outage, no new scheduler after the kill, no request held by the killed server (or one
not ended by another), a replica that did not recover from the Redis restart by itself; in scenario 2 (when the
shim was built) no request accepted, one lost in strict mode, a replica that took no insert after the restart; in
scenario 3 a phase without inserts. Smoke runs cut sizes and waits, not steps: fast mode's losses, the cost of
strict and the revocation's reach are figures there, not checks, as in a full run. A smoke run also runs scenario 2's
two modes and scenario 3 at once, after scenario 1 (--side-by-side: each on its own Redis and replicas, so scenario
3's rates share the cores with scenario 2's inserts), and its replicas of scenario 1 hold the records lease 3 s
(--records-lease-seconds; the service's default is at least 10 s), the wait for the killed scheduler's records.
Headline figures (scenario 1 unless named otherwise):
  accepted                   inserts answered 201
  lost                       accepted requests no server ended (neither an `ended` answer nor `already_ended` when
                             an end whose answer was lost was sent again), without a work record, and not in Redis
                             (queued or held) at the end
  ran_twice                  accepted requests ended successfully more than once (servers' logs), or with two
                             different completion records, or handed to a server while an earlier delivery to another
                             server still held its lease (by the lease_expires_at the select answered, 50 ms of
                             tolerance), or handed out after one of its ends succeeded. A request delivered again after
                             a kill (a lease that ran out) is counted as `redelivered`, not here
  records_missing            accepted requests without a work record in either replica's data directory, once every
                             ended one has one or --records-seconds passed
  negative_durations         requests whose record has a negative queue_time_ms, execution_time_ms or response_time_ms
  duty_failures              lines of both replicas' logs naming a duty and a failure ("background duty X failed");
                             `duty_failures_outside_redis_outage` leaves out those from the Redis kill to 3 s after
                             both replicas were ready again; ERROR lines and tracebacks are in `scenarios`
  fast_lost_on_host_crash,   scenario 2: requests answered 201 that are not in Redis after the crash (null when the
  strict_lost_on_host_crash  fsync shim could not be built)
  strict_insert_cost_pct     scenario 3, single inserts (`strict_batch_cost_pct`: batches of 100)
  revocation_reach_ms_max    scenario 1, before the load: of --revocations keys each verified by replica b and revoked
                             through replica a, the longest time from the revoke's answer to b's first 401
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

SERVER_FLAG = "--server-process"


# ---- a server process (started by the benchmark with SERVER_FLAG; light imports only) ------------------------


def server_process(config: dict) -> None:
    """Select (long poll, begin), work, end with the next select; log each delivery and each end as a JSON line.
    A transport error moves to the next replica; a lost connection connects again. SIGTERM: end what is in hand,
    disconnect, exit. With the hold file present, the handler holds its request until the process is killed."""
    import httpx

    urls, index = config["urls"], config["home"] % len(config["urls"])
    hold, work_s = Path(config["hold"]), config["work_ms"] / 1000
    log = open(config["log"], "a", buffering=1)  # one write per line: what was logged survives a kill -9
    stopping = False

    def note(event: str, **fields: object) -> None:
        log.write(json.dumps({"ev": event, "t": time.time(), **fields}) + "\n")

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)  # Ctrl-C reaches the whole process group: stop as on SIGTERM
    client = httpx.Client(headers={"Authorization": f"Bearer {config['key']}"}, timeout=httpx.Timeout(15, connect=2))
    token: str | None = None
    ends: list[dict] = []  # sent with the next select, kept until a select answers (a repeat is refused, not redone)
    while not stopping:
        url = urls[index]
        try:
            if token is None:
                response = client.post(f"{url}/v1/connections", json=config["connect"])
                if response.status_code != 201:
                    note("connect_failed", status=response.status_code, body=response.text[:200])
                    time.sleep(0.5)
                    continue
                token = response.json()["token"]
                note("connected", url=url, id=response.json().get("id"))
            body = {"connect_token": token, "wait_seconds": 1, "max_items": 1, "begin": True, "end": ends}
            response = client.post(f"{url}/v1/work/select", json=body)
        except httpx.TransportError as exc:
            note("transport_error", url=url, error=type(exc).__name__)
            index = (index + 1) % len(urls)
            time.sleep(0.2)
            continue
        if response.status_code == 204:
            ends = []
            continue
        if response.status_code != 200:
            code = _error_code(response)
            note("select_error", status=response.status_code, code=code, ends=len(ends))
            if code in ("unknown_connection", "connection_closed", "server_not_registered"):
                token, ends = None, []  # a closed connection gave its work back: those ends no longer apply
            elif response.status_code < 500 and ends:
                note("ends_dropped", tokens=[end["token"] for end in ends])  # refused as a whole: not sent again
                ends = []
            time.sleep(0.2)
            continue
        answer = response.json()
        ends = []
        for ended in answer.get("ended", []):
            note("ended", token=ended["token"], outcome=ended["outcome"])
        for error in answer.get("end_errors", []):
            note("end_error", token=error["token"], code=error["code"])
        if answer.get("terminate"):
            note("terminate", reason_code=answer.get("reason_code"))
            token = None
            continue
        for item in answer["items"]:
            note("got", token=item["token"], deliveries=item["deliveries"], lease=item["lease_expires_at"])
            if hold.exists():
                note("holding", token=item["token"])
                while hold.exists() and not stopping:  # until killed
                    time.sleep(0.05)
            time.sleep(work_s)
            ends.append({"token": item["token"]})
    if token is not None:
        for end in ends:
            try:
                response = client.post(f"{urls[index]}/v1/work/{end['token']}/end", json={"connect_token": token})
            except httpx.TransportError:
                continue
            if response.status_code == 200:
                note("ended", token=end["token"], outcome="completed")
            else:
                note("end_error", token=end["token"], code=_error_code(response))
        try:
            client.delete(f"{urls[index]}/v1/connections/{token}")
        except httpx.TransportError:
            pass
    note("stopped")


def _error_code(response: object) -> str:
    try:
        return str(response.json()["error"]["code"])  # type: ignore[attr-defined]
    except Exception:
        return "?"


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == SERVER_FLAG:
    server_process(json.loads(sys.argv[2]))
    sys.exit(0)


# ---- the benchmark --------------------------------------------------------------------------------------------

import argparse
import asyncio
import functools
import gc
import itertools
import re
import shutil
import statistics
import subprocess
import tempfile
import traceback
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import redis
import uvloop

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.processes import die_with_parent
from app.queues.keys import AeKeys, parse_token
from app.redis.embedded import server_binary
from bench._http import HttpClient
from bench._service import ADMIN_KEY, ROOT, Service, admin_setup, example_policy, free_port, machine
from bench._smoke import conclude, parse_args

HEADLINE = (
    "accepted", "lost", "ran_twice", "records_missing", "negative_durations", "duty_failures",
    "strict_lost_on_host_crash", "fast_lost_on_host_crash", "strict_insert_cost_pct",
)  # fmt: skip
SMOKE = {
    "seconds": 0.5, "requests": 60, "pairs": 1, "servers": 3, "drain_seconds": 20.0, "records_seconds": 15.0, "revocations": 2,
    "side_by_side": True, "records_lease_seconds": 3.0,
}  # fmt: skip
PREFIX = "wlm"
AE = "PAYROLL"
COMPLETION_TIME_MS = 2000  # a request held by a killed server comes back this soon
APPENDFSYNC = {"strict": "always", "fast": "everysec"}
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
SERVER = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BENCH", "application_environment": AE, "worker_tasks": 1}
ONLINE = {"userid": "ATM01"}
BATCH = 100
PRODUCERS = 4
LEASE_TOLERANCE_S = 0.05
OUTAGE_AFTER_READY_S = 3.0
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def policy() -> dict:
    # Servers beyond `max` would be told to end (0C14): room for restarted servers whose dead predecessors are
    # still connected; and a backlog limit the throughput phases (no servers) do not reach.
    return example_policy(
        completion_time_ms=COMPLETION_TIME_MS, server_limits={"min": 1, "max": 64, "spread_min": True}, backlog_limit=10_000_000
    )


class Cleanup:
    """What to stop, last started first; run once, whatever happened."""

    def __init__(self) -> None:
        self._stack: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, action: Callable[[], object]) -> None:
        self._stack.append((what, action))

    def run(self) -> None:
        while self._stack:
            what, action = self._stack.pop()
            try:
                action()
            except BaseException as exc:
                print(f"cleanup: stopping {what} failed: {exc!r}", file=sys.stderr, flush=True)


# ---- Redis, the fsync shim, the database ------------------------------------------------------------------------

SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* fsync/fdatasync of a regular file under FSYNC_SHIM_DIR: after the call succeeded, append "path size" to
   FSYNC_SHIM_LOG, the size taken BEFORE the call (bytes written during it may not be on disk). */
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int log_fd = -1;
static char watch[4096];
static size_t watch_len;

__attribute__((constructor)) static void init(void) {
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    const char *log_path = getenv("FSYNC_SHIM_LOG"), *dir = getenv("FSYNC_SHIM_DIR");
    if (log_path && dir) {
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        snprintf(watch, sizeof watch, "%s/", dir);
        watch_len = strlen(watch);
    }
}

static int synced(int (*real)(int), int fd) {
    struct stat st;
    int regular = log_fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    int rc = real(fd);
    if (rc == 0 && regular) {
        char link[64], path[4096], line[4200];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = 0;
            if (strncmp(path, watch, watch_len) == 0) {
                int len = snprintf(line, sizeof line, "%s %lld\n", path, (long long)st.st_size);
                if (len > 0 && (size_t)len < sizeof line) (void)!write(log_fd, line, (size_t)len);
            }
        }
    }
    return rc;
}

int fsync(int fd) { return synced(real_fsync, fd); }
int fdatasync(int fd) { return synced(real_fdatasync, fd); }
"""


def build_shim(directory: Path) -> tuple[Path | None, str]:
    """The LD_PRELOAD shim, compiled into `directory`; or None and why not."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None, "no C compiler (gcc or cc) on the PATH"
    source, library = directory / "fsync_shim.c", directory / "fsync_shim.so"
    source.write_text(SHIM_C)
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"], capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"{compiler} failed: {done.stderr.strip()[:300]}"
    return library, f"built with {compiler}"


class RedisServer:
    """A redis-server of our own, AOF on, on a fixed port and directory, so a restart reads the same AOF."""

    def __init__(self, directory: Path, appendfsync: str, *, shim: Path | None = None, rewrites: bool = True) -> None:
        self.dir = directory.resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.appendfsync, self.shim, self.rewrites = appendfsync, shim, rewrites
        self.fsync_log = self.dir / "fsync.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def spawn(self) -> None:
        """Start it (from the main thread: the parent-death signal follows the thread that spawned it)."""
        args = [
            server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "", "--maxmemory-policy", "noeviction",
            "--logfile", "redis.log", "--daemonize", "no",
        ]  # fmt: skip
        if not self.rewrites:
            args += ["--auto-aof-rewrite-percentage", "0"]
        env = dict(os.environ)
        if self.shim is not None:
            env |= {"LD_PRELOAD": str(self.shim), "FSYNC_SHIM_LOG": str(self.fsync_log), "FSYNC_SHIM_DIR": str(self.dir)}
        self.process = subprocess.Popen(
            args,
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )

    def answers(self) -> bool:
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:  # refused, or still loading its AOF
            return False
        finally:
            client.close()

    async def start(self, timeout: float = 60) -> float:
        """Spawn and wait until it answers; seconds it took."""
        started = time.monotonic()
        self.spawn()
        while time.monotonic() - started < timeout:
            assert self.process is not None
            if self.process.poll() is not None:
                break
            if await asyncio.to_thread(self.answers):
                return time.monotonic() - started
            await asyncio.sleep(0.05)
        raise RuntimeError(f"redis-server did not start; {self.dir / 'redis.log'}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        path = self.dir / "redis.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=10)

    def cut_to_last_fsync(self) -> dict[str, dict[str, int]]:
        """What a power loss leaves (call with the server dead): each AOF file written by appends cut back to the
        largest size it had when an fsync of it began."""
        synced: dict[str, int] = {}
        if self.fsync_log.exists():
            for line in self.fsync_log.read_text().splitlines():
                path, _, size = line.rpartition(" ")
                if path and size.isdigit():
                    synced[path] = max(synced.get(path, 0), int(size))
        appended = sorted((self.dir / "appendonlydir").glob("*.incr.aof"))
        if (self.dir / "appendonly.aof").exists():  # Redis before 7: one AOF file
            appended.append(self.dir / "appendonly.aof")
        cut = {}
        for path in appended:
            size = path.stat().st_size
            keep = min(size, synced.get(str(path), 0))
            if keep < size:
                os.truncate(path, keep)
            cut[path.name] = {"size": size, "fsynced": keep, "cut_bytes": size - keep}
        return cut


class Database:
    """A fresh PostgreSQL database (dropped by `drop`) when the server answers, else one SQLite file."""

    def __init__(self, admin_url: str | None, scratch: Path) -> None:
        self.admin_url, self.name = admin_url, None
        self._dropping: Future[None] | None = None
        self.kind, self.url = "sqlite", f"sqlite+aiosqlite:///{scratch / 'wlm.db'}"
        if admin_url is None:
            return
        try:
            import psycopg

            with psycopg.connect(admin_url, connect_timeout=3, autocommit=True) as conn:
                name = f"wlm_chaos_{os.getpid()}_{int(time.time())}"
                conn.execute(f'CREATE DATABASE "{name}"')
        except Exception as exc:
            say(f"PostgreSQL at {admin_url} not usable ({type(exc).__name__}: {str(exc).strip()[:120]}); one SQLite file instead")
            return
        self.name, self.kind = name, "postgresql"
        self.url = admin_url.rsplit("/", 1)[0] + f"/{name}"

    def drop_soon(self) -> None:
        """Start dropping it in a thread: a drop waits for PostgreSQL's checkpoint, seconds the next scenario's
        start can use."""
        executor = ThreadPoolExecutor(1)
        self._dropping = executor.submit(self._drop)
        executor.shutdown(wait=False)  # the drop goes on; `drop` waits for it

    def drop(self) -> None:
        """Drop it now, or wait for the drop `drop_soon` started (and raise what it raised)."""
        if self._dropping is None:
            self._drop()
        else:
            self._dropping.result()

    def _drop(self) -> None:
        if self.name is None:
            return
        import psycopg

        with psycopg.connect(self.admin_url, connect_timeout=3, autocommit=True) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# ---- load: producers and server processes -----------------------------------------------------------------------


class Producers:
    """PRODUCERS coroutines inserting through `urls` (request i of a producer to replica i mod n; a replica that
    refuses the connection, the request unsent, is passed over for the next). `rate`: requests a second in all,
    paced; None: flat out. `batch`: items per insert (1: POST /v1/work)."""

    def __init__(
        self, urls: list[str], key: str, qm_token: str, *, rate: float | None = None, batch: int = 1, keep_tokens: bool = True
    ) -> None:
        self.urls, self.qm_token, self.rate, self.batch, self.keep_tokens = urls, qm_token, rate, batch, keep_tokens
        self.clients = {url: HttpClient(url, key) for url in urls}
        self.accepted: dict[str, float] = {}  # token -> when its 201 came (monotonic)
        self.accepted_count = 0
        self.attempts = 0
        self.outcomes: Counter[str] = Counter()
        self.stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._produce(i)) for i in range(PRODUCERS)]

    async def finish(self) -> None:
        self.stop.set()
        await asyncio.gather(*self._tasks)
        for client in self.clients.values():
            await client.close()

    async def _produce(self, index: int) -> None:
        interval = PRODUCERS / self.rate if self.rate else 0.0
        due, n = time.monotonic() + index * interval / PRODUCERS, 0
        items = [{"classification": ONLINE, "payload": {"p": index, "i": i}} for i in range(self.batch)]
        while not self.stop.is_set():
            if interval:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                due = max(due + interval, time.monotonic() - 1.0)  # after a stall, no burst of more than a second
            if self.batch == 1:
                path, body = (
                    "/v1/work",
                    {
                        "connect_token": self.qm_token,
                        "application_environment": AE,
                        "classification": ONLINE,
                        "payload": {"p": index, "n": n},
                    },
                )
            else:
                path, body = "/v1/work:batch", {"connect_token": self.qm_token, "application_environment": AE, "items": items}
            first = (index + n) % len(self.urls)
            n += 1
            self.attempts += 1
            if not await self._insert([self.urls[(first + k) % len(self.urls)] for k in range(len(self.urls))], path, body):
                await asyncio.sleep(0.05)  # a failing replica or Redis: no busy loop

    async def _insert(self, urls: list[str], path: str, body: dict) -> bool:
        for url in urls:
            try:
                status, answer = await asyncio.wait_for(self.clients[url].request("POST", path, body), 10)
            except ConnectionRefusedError:
                self.outcomes["connection refused (not sent)"] += 1
                continue
            except Exception as exc:
                self.outcomes[f"no answer ({type(exc).__name__})"] += 1
                return False
            if status == 201:
                now = time.monotonic()
                tokens = [answer["token"]] if self.batch == 1 else [item["token"] for item in answer["items"]]
                self.accepted_count += len(tokens)
                if self.keep_tokens:
                    for token in tokens:
                        self.accepted[token] = now
                self.outcomes["201"] += 1
                return True
            code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
            self.outcomes[f"{status} {code}"] += 1
            return False
        return False


class ServerProcess:
    def __init__(self, name: str, directory: Path, urls: list[str], key: str, home: int, work_ms: float) -> None:
        self.name = name
        self.log, self.hold = directory / f"{name}.jsonl", directory / f"{name}.hold"
        config = {
            "urls": urls,
            "key": key,
            "home": home,
            "work_ms": work_ms,
            "log": str(self.log),
            "hold": str(self.hold),
            "connect": SERVER,
        }
        with (directory / f"{name}.stderr").open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), SERVER_FLAG, json.dumps(config)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=die_with_parent,
            )  # fmt: skip

    def events(self) -> list[dict]:
        if not self.log.exists():
            return []
        events = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut by kill -9
            event["server"] = self.name
            events.append(event)
        return events

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Fleet:
    def __init__(self, directory: Path, urls: list[str], key: str, count: int, work_ms: float) -> None:
        self.dir, self.urls, self.key, self.work_ms = directory, urls, key, work_ms
        directory.mkdir(parents=True, exist_ok=True)
        self.servers = [ServerProcess(f"s{i}", directory, urls, key, i, work_ms) for i in range(count)]
        self.retired: list[ServerProcess] = []

    def replace(self, index: int) -> ServerProcess:
        old = self.servers[index]
        self.retired.append(old)
        self.servers[index] = ServerProcess(f"s{index}r{len(self.retired)}", self.dir, self.urls, self.key, index, self.work_ms)
        return self.servers[index]

    def all(self) -> list[ServerProcess]:
        return self.retired + self.servers

    def events(self) -> list[dict]:
        return [event for server in self.all() for event in server.events()]

    def stop(self) -> None:
        for server in self.servers:
            if server.process.poll() is None:
                server.process.terminate()
        for server in self.all():
            server.stop()


# ---- checks ---------------------------------------------------------------------------------------------------


def deliveries(events: list[dict]) -> dict:
    """From the servers' logs: per token its deliveries and successful ends, and what would be a bug: ended more
    than once; handed to a server while an earlier delivery to another server still held its lease; handed out
    after it had ended."""
    gots: dict[str, list[dict]] = defaultdict(list)
    ends: dict[str, list[dict]] = defaultdict(list)
    end_errors: Counter[str] = Counter()
    already_ended: set[str] = set()  # an end whose answer was lost (replica killed, 5xx), refused when sent again
    for event in events:
        if event["ev"] == "got":
            event["lease_ts"] = datetime.fromisoformat(event["lease"].replace("Z", "+00:00")).timestamp()
            gots[event["token"]].append(event)
        elif event["ev"] == "ended":
            ends[event["token"]].append(event)
        elif event["ev"] == "end_error":
            end_errors[event["code"]] += 1
            if event["code"] == "already_ended":
                already_ended.add(event["token"])
    ended_twice = {token for token, done in ends.items() if len(done) > 1}
    concurrent, after_end = set(), set()
    for token, delivered in gots.items():
        delivered.sort(key=lambda e: e["t"])
        for earlier, later in itertools.pairwise(delivered):
            if later["server"] != earlier["server"] and later["t"] < earlier["lease_ts"] - LEASE_TOLERANCE_S:
                concurrent.add(token)
        if ends.get(token):
            first_end = min(e["t"] for e in ends[token])
            if any(e["t"] > first_end + LEASE_TOLERANCE_S for e in delivered):
                after_end.add(token)
    redelivered = {t for t, delivered in gots.items() if len(delivered) > 1 or any(e["deliveries"] > 1 for e in delivered)}
    return {
        "ended": set(ends), "already_ended": already_ended, "done": set(ends) | already_ended,
        "ended_twice": ended_twice, "concurrent": concurrent, "after_end": after_end,
        "redelivered": redelivered, "gots": gots, "ends": ends, "end_errors": dict(end_errors),
    }  # fmt: skip


RECORD_COLUMNS = ["token", "outcome", "deliveries", "ended_at", "response_time_ms", "queue_time_ms", "execution_time_ms"]
DURATIONS = ("queue_time_ms", "execution_time_ms", "response_time_ms")


def read_records(data_dirs: list[Path]) -> pa.Table:
    """Every record row under the data directories, copies kept (a reader would drop them by token)."""
    files = [f for d in data_dirs for f in sorted((d / "records").glob("date=*/*.parquet"))]
    tables = []
    for path in files:
        try:
            tables.append(pq.read_table(path, columns=RECORD_COLUMNS))
        except Exception as exc:
            say(f"unreadable record file {path}: {exc!r}")
    if not tables:
        return pa.table({c: [] for c in RECORD_COLUMNS})
    return pa.concat_tables(tables, promote_options="default")


def check_records(table: pa.Table, accepted: set[str]) -> dict:
    rows = table.to_pylist()
    by_token: dict[str, set] = defaultdict(set)
    negative: dict[str, set] = {column: set() for column in DURATIONS}
    lowest: dict[str, int] = {}
    for row in rows:
        by_token[row["token"]].add((row["outcome"], row["ended_at"], row["deliveries"]))
        for column in DURATIONS:
            value = row[column]
            if value is not None and value < 0:
                negative[column].add(row["token"])
                lowest[column] = min(lowest.get(column, 0), value)
    completed_twice = {t for t, kinds in by_token.items() if sum(1 for k in kinds if k[0] == "completed") > 1}
    outcomes = Counter(next(iter(kinds))[0] if len(kinds) == 1 else "several" for t, kinds in by_token.items() if t in accepted)
    return {
        "rows": len(rows),
        "tokens": set(by_token),
        "missing": accepted - set(by_token),
        "completed_twice": completed_twice,
        "negative_tokens": set().union(*negative.values()),
        "negative_by_column": {c: len(t) for c, t in negative.items()},
        "most_negative_ms": lowest,
        "outcomes": dict(outcomes),
        "copies": len(rows) - len(by_token),
    }


def present_in_redis(client: redis.Redis, tokens: list[str]) -> set[str]:
    """The tokens whose request is still in Redis (queued or held: its entry in the environment's request hash)."""
    found: set[str] = set()
    for start in range(0, len(tokens), 1000):
        chunk = tokens[start : start + 1000]
        pipe = client.pipeline(transaction=False)
        for token in chunk:
            node, ae, request_id = parse_token(token)  # type: ignore[misc]
            pipe.hexists(AeKeys(PREFIX, node, ae).req, request_id)
        found |= {token for token, there in zip(chunk, pipe.execute(), strict=True) if there}
    return found


DUTY_FAILED = re.compile(r"duty.*fail|fail.*duty", re.IGNORECASE)


def scan_log(text: str) -> dict:
    """A service log's failures: duty failures (a line naming a duty and a failure), ERROR lines, tracebacks (each
    exception of a chain counts), WARNING lines; `lines`: those lines, for excerpts."""
    lines = text.splitlines()
    duty = [line for line in lines if DUTY_FAILED.search(line)]
    errors = [line for line in lines if line.startswith(("ERROR", "CRITICAL"))]
    warnings = [line for line in lines if line.startswith("WARNING")]
    flagged = set(duty + errors + warnings)
    return {
        "duty_failures": len(duty),
        "error_lines": len(errors),
        "tracebacks": sum(1 for line in lines if line.startswith("Traceback (most recent call last)")),
        "warning_lines": len(warnings),
        "lines": [line for line in lines if line in flagged],
    }


def add_scans(scans: list[dict]) -> dict:
    """The scans of several logs added up, with excerpts (`lines` dropped)."""
    total: dict = {k: sum(s[k] for s in scans) for k in ("duty_failures", "error_lines", "tracebacks", "warning_lines")}
    total["excerpts"] = distinct([line for s in scans for line in s["lines"]])
    return total


def distinct(lines: list[str], most: int = 12) -> list[str]:
    """One line of each kind (numbers blurred), ERROR and duty lines first, with how often each kind came."""
    kinds: dict[str, list] = {}
    for line in sorted(lines, key=lambda line: not (line.startswith("ERROR") or DUTY_FAILED.search(line))):
        kind = re.sub(r"0x[0-9a-f]+|\d+", "#", line)[:160]
        if kind in kinds:
            kinds[kind][1] += 1
        elif len(kinds) < most:
            kinds[kind] = [line[:300], 1]
    return [f"{count}x {line}" for line, count in kinds.values()]


async def get_json(url: str, path: str, timeout: float = 3) -> tuple[int, object]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=timeout) as client:
        response = await client.get(f"{url}{path}")
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text


async def ready(url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            return (await client.get(f"{url}/readyz")).status_code == 200
    except httpx.HTTPError:
        return False


async def key_revocation(urls: list[str], tries: int) -> dict:
    """How long after a revoke answered by one replica the other refuses the key, which it had just verified (and
    cached for WLM_AUTH_CACHE_SECONDS, 5 s): the time to the first 401 of a client asking it over and over."""
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    reach_ms = []
    async with httpx.AsyncClient(timeout=10) as http:
        (await http.post(f"{urls[0]}/v1/principals", headers=admin, json={"name": "revoked", "roles": ["viewer"]})).raise_for_status()
        for _ in range(tries):
            created = (await http.post(f"{urls[0]}/v1/api-keys", headers=admin, json={"principal": "revoked"})).json()
            probe = {"Authorization": f"Bearer {created['key']}"}
            assert (await http.get(f"{urls[1]}/v1/whoami", headers=probe)).status_code == 200
            (await http.delete(f"{urls[0]}/v1/api-keys/{created['id']}", headers=admin)).raise_for_status()
            revoked = time.monotonic()
            while (await http.get(f"{urls[1]}/v1/whoami", headers=probe)).status_code == 200 and time.monotonic() - revoked < 10:
                pass
            reach_ms.append(round((time.monotonic() - revoked) * 1000, 1))
    return {"tries": tries, "median_ms": statistics.median(reach_ms), "max_ms": max(reach_ms), "each_ms": reach_ms}


async def connect_queue_manager(url: str, key: str) -> str:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        response = await client.post(f"{url}/v1/connections", json=QM)
        response.raise_for_status()
        return str(response.json()["token"])


def log_sizes(services: list[Service]) -> list[int]:
    return [(s.dir / "service.log").stat().st_size if (s.dir / "service.log").exists() else 0 for s in services]


def log_between(service: Service, start: int, end: int | None = None) -> str:
    with (service.dir / "service.log").open("rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(max(0, end - start))
    return data.decode(errors="replace")


# ---- scenario 1: two replicas on one Redis, under load and chaos ----------------------------------------------


async def cluster_scenario(args: argparse.Namespace, scratch: Path, cleanup: Cleanup) -> dict:
    mode, seconds = args.durability, args.seconds
    say(f"scenario 1: two replicas on one Redis (appendfsync {APPENDFSYNC[mode]}, durability {mode})")
    database = Database(None if args.sqlite else args.postgres, scratch)
    cleanup.push("the database", database.drop)
    redis_server = RedisServer(scratch / "redis", APPENDFSYNC[mode])
    cleanup.push("redis-server", redis_server.stop)
    await redis_server.start()
    settings = {"redis_url": redis_server.url, "database_url": database.url, "durability": mode}
    if args.records_lease_seconds is not None:
        settings["records_lease_seconds"] = str(args.records_lease_seconds)
    replicas: list[Service] = []
    for name in ("replica-a", "replica-b"):  # one after the other: the first migrates the database
        replica = await asyncio.to_thread(Service, directory=scratch / name, **settings)
        cleanup.push(name, replica.stop)
        replicas.append(replica)
    urls = [r.url for r in replicas]
    say(f"replicas ready at {', '.join(urls)} ({database.kind}); installing the policy")
    qm_key, server_key = await admin_setup(urls[0], policy())
    revocation = await key_revocation(urls, args.revocations)
    say(f"a key revoked on one replica was refused by the other after {revocation['median_ms']} ms (median; max {revocation['max_ms']} ms)")
    qm_token = await connect_queue_manager(urls[0], qm_key)
    fleet = Fleet(scratch / "servers", urls, server_key, args.servers, args.work_ms)
    cleanup.push("the servers", fleet.stop)
    deadline = time.monotonic() + 60
    while not all(any(e["ev"] == "connected" for e in s.events()) for s in fleet.servers):
        if time.monotonic() > deadline:
            raise RuntimeError("the servers did not connect within 60 s: see " + str(fleet.dir))
        await asyncio.sleep(0.2)
    rate = args.requests / (4 * seconds)
    say(f"{args.servers} servers connected; {PRODUCERS} producers inserting {rate:.0f}/s in all")
    producers = Producers(urls, qm_key, qm_token, rate=rate)
    gc.freeze()
    producers.start()
    started = time.monotonic()
    events: dict[str, dict] = {}
    try:
        await asyncio.sleep(seconds)
        events["scheduler_kill"] = await kill_scheduler(replicas)
        await asyncio.sleep(max(0.0, started + 2 * seconds - time.monotonic()))
        events["server_kill"] = await kill_server(fleet)
        await asyncio.sleep(max(0.0, started + 3 * seconds - time.monotonic()))
        events["redis_kill"] = await kill_redis(redis_server, replicas, producers)
        await asyncio.sleep(max(1.0, started + 4 * seconds - time.monotonic()))
    finally:
        await producers.finish()
    load_s = time.monotonic() - started
    accepted = set(producers.accepted)
    say(
        f"load over after {load_s:.1f} s: {len(accepted)} accepted of "
        f"{producers.attempts} attempts; waiting for every accepted request to end"
    )

    deadline = time.monotonic() + args.drain_seconds
    while True:
        seen = deliveries(fleet.events())
        unfinished = accepted - seen["done"]
        if not unfinished or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    drain_s = time.monotonic() - started - load_s
    say(f"{len(accepted) - len(unfinished)} ended, {len(unfinished)} not, {drain_s:.1f} s after the load; stopping the servers")
    await asyncio.to_thread(fleet.stop)
    seen = deliveries(fleet.events())
    unfinished = accepted - seen["done"]

    say("waiting for the work records to be written")
    data_dirs = [r.dir / "data" for r in replicas]
    deadline = time.monotonic() + args.records_seconds
    while True:
        table = await asyncio.to_thread(read_records, data_dirs)
        recorded = set(table.column("token").to_pylist())
        if (seen["done"] & accepted) <= recorded or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    records = check_records(table, accepted)
    with redis_server.client() as client:
        still_queued = await asyncio.to_thread(present_in_redis, client, sorted(unfinished - records["tokens"]))
    lost = unfinished - records["tokens"] - still_queued
    held = events["server_kill"].get("held", [])
    held_done = [t for t in held if any(e["server"] != events["server_kill"]["server"] for e in seen["ends"].get(t, []))]
    events["server_kill"]["held_ended_by_another_server"] = len(held_done)

    logs = add_scans([scan_log(log_between(r, 0)) for r in replicas])
    window = await events["redis_kill"]["log_window"]
    outage = add_scans([scan_log(log_between(r, a, b)) for r, (a, b) in zip(replicas, window, strict=True)])
    ran_twice = seen["ended_twice"] | seen["concurrent"] | seen["after_end"] | records["completed_twice"]
    figures = {
        "durability": mode,
        "redis_appendfsync": APPENDFSYNC[mode],
        "database": database.kind,
        "insert_rate_per_s": round(rate, 1),
        "load_seconds": round(load_s, 1),
        "inserts_attempted": producers.attempts,
        "insert_outcomes": dict(producers.outcomes),
        "accepted": len(accepted),
        "ended_by_a_server": len(seen["ended"] & accepted),
        # Ended, but the answer was lost (the select carrying the end went to a replica killed under it): sent again,
        # refused as `already_ended`.
        "end_answer_lost": len((seen["already_ended"] - seen["ended"]) & accepted),
        "not_ended_by_a_server": len(unfinished),
        "ended_not_accepted": len(seen["ended"] - accepted),  # inserts done whose answer was lost (replica or Redis killed)
        "still_queued_at_end": len(still_queued),
        "lost": len(lost),
        "lost_sample": sorted(lost)[:5],
        "ran_twice": len(ran_twice),
        "ended_twice": len(seen["ended_twice"]),
        "delivered_concurrently": len(seen["concurrent"]),
        "delivered_after_end": len(seen["after_end"]),
        "records_completed_twice": len(records["completed_twice"]),
        "ran_twice_sample": sorted(ran_twice)[:5],
        "redelivered": len(seen["redelivered"] & accepted),
        "end_errors": seen["end_errors"],
        "records_rows": records["rows"],
        "record_copies": records["copies"],
        "record_outcomes": records["outcomes"],
        "records_missing": len(records["missing"]),
        "records_missing_sample": sorted(records["missing"])[:5],
        "negative_durations": len(records["negative_tokens"]),
        "negative_by_column": records["negative_by_column"],
        "most_negative_ms": records["most_negative_ms"],
        "drain_seconds": round(drain_s, 1),
        "key_revocation": revocation,
        "events": {name: shown(event) for name, event in events.items()},
        "logs": logs,
        # From the Redis kill to OUTAGE_AFTER_READY_S after both replicas were ready again.
        "logs_during_redis_outage": {k: v for k, v in outage.items() if k != "excerpts"},
        "duty_failures_outside_redis_outage": logs["duty_failures"] - outage["duty_failures"],
    }
    for replica in replicas:
        await asyncio.to_thread(replica.stop)
    database.drop_soon()
    return figures


def shown(event: dict) -> dict:
    """An event's figures for the JSON: the log offsets left out, the held tokens counted."""
    figures = {k: v for k, v in event.items() if k not in ("log_window", "held")}
    return figures | ({"held": len(event["held"])} if "held" in event else {})


async def kill_scheduler(replicas: list[Service]) -> dict:
    status, before = await get_json(replicas[0].url, "/v1/scheduler")
    if status != 200 or not isinstance(before, dict) or not before.get("holder"):
        return {"done": False, "why": f"GET /v1/scheduler: {status} {str(before)[:200]}"}
    holder = next((m for m in before["members"] if m["member"] == before["holder"]), None)
    victim = next((r for r in replicas if holder and r.process.pid == holder.get("pid")), None)
    if victim is None:
        return {"done": False, "why": f"the holder {before['holder']} is none of our replicas"}
    survivor = next(r for r in replicas if r is not victim)
    victim.kill()
    killed = time.monotonic()
    say(f"killed -9 the scheduler {before['holder']} (epoch {before['epoch']}); restarting it")
    restart = asyncio.create_task(asyncio.to_thread(victim.start))
    failover_s, after = None, None
    while time.monotonic() - killed < 30:
        try:
            status, after = await get_json(survivor.url, "/v1/scheduler")
        except httpx.HTTPError:
            status = 0
        if (
            status == 200
            and isinstance(after, dict)
            and after.get("holder") not in (None, before["holder"])
            and after["epoch"] > before["epoch"]
        ):
            failover_s = time.monotonic() - killed
            break
        await asyncio.sleep(0.05)
    try:
        await restart
        restarted_s = time.monotonic() - killed
    except Exception as exc:
        restarted_s = None
        say(f"the killed replica did not come back: {exc}")
    say(
        f"new scheduler {after and after.get('holder')} after {failover_s and round(failover_s, 2)} "
        f"s; the replica was back after {restarted_s and round(restarted_s, 1)} s"
    )
    after = after if isinstance(after, dict) else {}
    return {
        "done": True, "killed": before["holder"], "epoch_before": before["epoch"],
        "new_holder": after.get("holder"), "epoch_after": after.get("epoch"),
        "failover_s": failover_s and round(failover_s, 2), "replica_restarted_after_s": restarted_s and round(restarted_s, 1),
    }  # fmt: skip


async def kill_server(fleet: Fleet) -> dict:
    victim = fleet.servers[0]
    victim.hold.touch()
    deadline = time.monotonic() + 15
    held: list[str] = []
    while time.monotonic() < deadline and not held:
        held = [e["token"] for e in victim.events() if e["ev"] == "holding"]
        await asyncio.sleep(0.05)
    victim.process.kill()
    victim.process.wait()
    victim.hold.unlink(missing_ok=True)
    fleet.replace(0)
    if held:
        say(f"killed -9 server {victim.name} holding {held[0]}; started a new server in its place")
    else:
        say(f"server {victim.name} got no work within 15 s; killed -9 anyway")
    return {"done": bool(held), "server": victim.name, "held": held}


async def kill_redis(redis_server: RedisServer, replicas: list[Service], producers: Producers) -> dict:
    before = log_sizes(replicas)
    redis_server.kill()
    killed = time.monotonic()
    say("killed -9 redis-server; restarting it on the same AOF in 1 s")
    await asyncio.sleep(1.0)
    restart_s = await redis_server.start()
    restarted = time.monotonic()
    ready_s: list[float | None] = [None] * len(replicas)
    while time.monotonic() - restarted < 60 and None in ready_s:
        for i, replica in enumerate(replicas):
            if ready_s[i] is None and await ready(replica.url):
                ready_s[i] = round(time.monotonic() - restarted, 2)
        await asyncio.sleep(0.1)
    first = await first_insert_after(producers, restarted, 60)
    restarted_replicas = []
    for i, replica in enumerate(replicas):
        if ready_s[i] is None:
            say(f"{replica.dir.name} did not recover from the Redis restart within 60 s: restarting it")
            replica.kill()
            await asyncio.to_thread(replica.start)
            restarted_replicas.append(replica.dir.name)
    window = asyncio.create_task(close_log_window(replicas, before))
    say(
        f"redis back after {restart_s:.1f} s; replicas ready after {ready_s} s; "
        f"first insert accepted {first and round(first, 2)} s after the restart"
    )
    return {
        "down_s": round(restarted - killed, 2), "replicas_ready_after_s": ready_s,
        "first_insert_accepted_after_s": first and round(first, 2), "replicas_restarted_by_the_benchmark": restarted_replicas,
        "log_window": window,
    }  # fmt: skip


async def close_log_window(replicas: list[Service], before: list[int]) -> list[tuple[int, int]]:
    """The replicas' log offsets from the Redis kill to OUTAGE_AFTER_READY_S after they were ready again (the duties'
    first rounds after the restart belong to the outage), taken while the load goes on."""
    await asyncio.sleep(OUTAGE_AFTER_READY_S)
    return list(zip(before, log_sizes(replicas), strict=True))


async def first_insert_after(producers: Producers, restarted: float, timeout: float) -> float | None:
    """Seconds from `restarted` to the first insert accepted after it (when the service took work again), or None."""
    while time.monotonic() - restarted < timeout:
        later = [t for t in producers.accepted.values() if t > restarted]
        if later:
            return min(later) - restarted
        await asyncio.sleep(0.1)
    return None


# ---- scenario 2: host crash ---------------------------------------------------------------------------------


async def host_crash(mode: str, args: argparse.Namespace, scratch: Path, shim: Path, cleanup: Cleanup) -> dict:
    say(
        f"scenario 2 ({mode}): Redis with appendfsync {APPENDFSYNC[mode]}, one replica, {PRODUCERS} producers flat out for {args.seconds} s"
    )
    home = scratch / f"crash-{mode}"
    redis_server = RedisServer(home / "redis", APPENDFSYNC[mode], shim=shim)
    cleanup.push(f"redis-server ({mode} crash)", redis_server.stop)
    await redis_server.start()
    with redis_server.client() as client:
        appendfsync = client.config_get("appendfsync").get("appendfsync")
    service = await asyncio.to_thread(
        Service, directory=home / "service", redis_url=redis_server.url, durability=mode, sweeper_enabled="false"
    )
    cleanup.push(f"the replica ({mode} crash)", service.stop)
    qm_key, _ = await admin_setup(service.url, policy())
    qm_token = await connect_queue_manager(service.url, qm_key)
    producers = Producers([service.url], qm_key, qm_token)
    producers.start()
    started = time.monotonic()
    service_restarted = False
    try:
        await asyncio.sleep(args.seconds / 2)
        redis_server.kill()
        crashed = time.monotonic()
        cut = redis_server.cut_to_last_fsync()
        say(f"host crash after {crashed - started:.1f} s: {len(producers.accepted)} accepted so far; AOF cut back to its last fsync: {cut}")
        await redis_server.start()
        restarted = time.monotonic()
        first = await first_insert_after(producers, restarted, 30)
        if first is None:
            say("the replica took no insert within 30 s of the Redis restart: restarting it")
            service.kill()
            await asyncio.to_thread(service.start)
            service_restarted = True
        await asyncio.sleep(max(1.0, started + args.seconds - time.monotonic()))
    finally:
        await producers.finish()
    accepted = producers.accepted
    before = [t for t, at in accepted.items() if at <= crashed]
    with redis_server.client() as client:
        present = await asyncio.to_thread(present_in_redis, client, sorted(accepted))
        in_redis = sum(client.hlen(AeKeys(PREFIX, node, ae).req) for node, ae in {tuple(parse_token(t)[:2]) for t in accepted})  # type: ignore[index]
    lost = set(accepted) - present
    rate_before = len(before) / max(crashed - started, 1e-9)
    scan = add_scans([scan_log(log_between(service, 0))])
    await asyncio.to_thread(service.stop)
    redis_server.stop()
    say(f"{mode}: {len(lost)} of {len(accepted)} accepted requests lost ({len(before)} accepted before the crash)")
    return {
        "appendfsync": appendfsync,
        "accepted": len(accepted),
        "accepted_before_crash": len(before),
        "lost": len(lost),
        "lost_answered_before_crash": len(lost & set(before)),
        "lost_seconds_of_inserts": round(len(lost) / rate_before, 2) if rate_before else None,
        "insert_rate_before_crash_per_s": round(rate_before),
        "queued_not_accepted": in_redis - len(present),  # done, but the 201 never came
        "aof_cut": cut,
        "first_insert_accepted_after_restart_s": first and round(first, 2),
        "replica_restarted_by_the_benchmark": service_restarted,
        "insert_outcomes": dict(producers.outcomes),
        "logs": scan,
    }


# ---- scenario 3: what strict costs an insert --------------------------------------------------------------------


async def insert_cost(args: argparse.Namespace, scratch: Path, cleanup: Cleanup) -> dict:
    say(
        f"scenario 3: insert rates, fast and strict interleaved, {args.pairs} "
        f"pairs of {args.seconds} s phases, single and batches of {BATCH}"
    )

    async def deploy(mode: str) -> tuple[Service, RedisServer, str, str]:
        home = scratch / f"cost-{mode}"
        # No AOF rewrite (a fork) in the middle of one mode's phase; no sweeper moving the growing queue.
        redis_server = RedisServer(home / "redis", APPENDFSYNC[mode], rewrites=False)
        cleanup.push(f"redis-server ({mode} cost)", redis_server.stop)
        await redis_server.start()
        service = await asyncio.to_thread(
            Service, directory=home / "service", redis_url=redis_server.url, durability=mode, sweeper_enabled="false"
        )
        cleanup.push(f"the replica ({mode} cost)", service.stop)
        qm_key, _ = await admin_setup(service.url, policy())
        return service, redis_server, qm_key, await connect_queue_manager(service.url, qm_key)

    # Both at once (each start waits on its service much of the time); each to its end, so that cleanup knows all.
    modes = ("fast", "strict")
    targets = {}
    for mode, outcome in zip(modes, await asyncio.gather(*(deploy(mode) for mode in modes), return_exceptions=True), strict=True):
        if isinstance(outcome, BaseException):
            raise outcome
        targets[mode] = outcome
    gc.freeze()
    rates: dict[str, dict[str, list[float]]] = {kind: {"fast": [], "strict": []} for kind in ("single", "batch")}
    for pair in range(args.pairs):
        for kind in ("single", "batch"):
            # fast, strict in odd pairs; strict, fast in even ones: a drift of the machine's speed over the run
            # (or a queue growing in both) does not always favour the mode measured first.
            for mode in ("fast", "strict") if pair % 2 == 0 else ("strict", "fast"):
                service, _, qm_key, qm_token = targets[mode]
                producers = Producers([service.url], qm_key, qm_token, batch=1 if kind == "single" else BATCH, keep_tokens=False)
                producers.start()
                await asyncio.sleep(0.5)  # warm-up: connections opened
                count, at = producers.accepted_count, time.monotonic()
                await asyncio.sleep(args.seconds)
                rate = (producers.accepted_count - count) / (time.monotonic() - at)
                await producers.finish()
                failed = sum(v for k, v in producers.outcomes.items() if k != "201")
                rates[kind][mode].append(rate)
                say(f"pair {pair + 1} {kind:6} {mode:6}: {rate:,.0f} requests/s" + (f" ({failed} failed inserts)" if failed else ""))
    logs = {}
    for mode, (service, redis_server, _, _) in targets.items():
        logs[mode] = add_scans([scan_log(log_between(service, 0))])
        await asyncio.to_thread(service.stop)
        redis_server.stop()

    def cost(kind: str) -> tuple[float, list[float]]:
        pairs = [(f / s - 1) * 100 for f, s in zip(rates[kind]["fast"], rates[kind]["strict"], strict=False)]
        return round(statistics.median(pairs), 1), [round(p, 1) for p in pairs]

    single, single_pairs = cost("single")
    batch, batch_pairs = cost("batch")
    return {
        "strict_insert_cost_pct": single,
        "strict_batch_cost_pct": batch,
        "cost_pct_per_pair": {"single": single_pairs, "batch": batch_pairs},
        "rates_per_s": {kind: {mode: [round(r) for r in values] for mode, values in modes.items()} for kind, modes in rates.items()},
        "logs": {mode: {k: v for k, v in scan.items() if k != "excerpts"} for mode, scan in logs.items()},
    }


# ---- main -------------------------------------------------------------------------------------------------------


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "app", "migrations"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        return head + (" + uncommitted changes in app/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def redis_version() -> str:
    try:
        out = subprocess.run([server_binary(), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"v=(\S+)", out)
    return f"{server_binary()} {found.group(1) if found else out.strip()[:60]}"


async def run(args: argparse.Namespace, scratch: Path, cleanup: Cleanup, result: dict) -> None:
    """Fills `result` as the scenarios finish (a failure later leaves the earlier figures in it)."""
    scenarios: dict = {}
    result["scenarios"] = scenarios
    if 1 in args.only:
        s1 = await cluster_scenario(args, scratch / "cluster", cleanup)
        scenarios["two_replicas_under_chaos"] = s1
        result |= {k: s1[k] for k in ("accepted", "lost", "ran_twice", "records_missing", "negative_durations")}
        result["duty_failures"] = s1["logs"]["duty_failures"]
        result |= {
            "duty_failures_outside_redis_outage": s1["duty_failures_outside_redis_outage"],
            "error_log_lines": s1["logs"]["error_lines"],
            "redelivered": s1["redelivered"],
            "revocation_reach_ms_max": s1["key_revocation"]["max_ms"],
        }
    # Scenario 2's modes and scenario 3: one after another, or all at once (--side-by-side).
    steps: dict[str, Callable[[], Awaitable[dict]]] = {}
    if 2 in args.only:
        (scratch / "shim").mkdir(parents=True, exist_ok=True)
        shim, how = build_shim(scratch / "shim")
        say(f"fsync shim: {how}")
        if shim is None:
            scenarios["host_crash"] = {"skipped": f"the fsync shim could not be built: {how}"}
        else:
            scenarios["host_crash"] = {}
            for mode in ("fast", "strict"):
                steps[mode] = functools.partial(host_crash, mode, args, scratch, shim, cleanup)
    if 3 in args.only:
        steps["cost"] = functools.partial(insert_cost, args, scratch, cleanup)

    async def step(name: str) -> None:
        figures = await steps[name]()
        if name == "cost":
            scenarios["insert_cost"] = figures
            result.update(
                strict_insert_cost_pct=figures["strict_insert_cost_pct"],
                strict_batch_cost_pct=figures["strict_batch_cost_pct"],
                insert_rates_per_s=figures["rates_per_s"],
            )
        else:
            scenarios["host_crash"][name] = figures
            result[f"{name}_lost_on_host_crash"] = figures["lost"]

    if args.side_by_side:
        await asyncio.gather(*(step(name) for name in steps))
    else:
        for name in steps:
            await step(name)


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: stop everything on the way out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--seconds", type=float, default=5.0,
        help="a phase: scenario 1 loads 4 (an event after each of the first 3), scenario 2 one per mode (crash halfway), "
        "scenario 3 measures each rate this long",
    )  # fmt: skip
    parser.add_argument(
        "--requests", type=int, default=2000,
        help="scenario 1: inserts, paced over 4 x --seconds (recoveries that take longer stretch the load at the same rate)",
    )  # fmt: skip
    parser.add_argument("--pairs", type=int, default=3, help="scenario 3: interleaved pairs (fast then strict, strict then fast, ...)")
    parser.add_argument("--servers", type=int, default=8, help="scenario 1: server processes")
    parser.add_argument("--work-ms", type=float, default=20.0, help="scenario 1: a server's work per request")
    parser.add_argument(
        "--durability", choices=("strict", "fast"), default="strict", help="scenario 1's mode (appendfsync always / everysec)"
    )
    parser.add_argument("--drain-seconds", type=float, default=90.0, help="scenario 1: how long to wait for every accepted request to end")
    parser.add_argument("--revocations", type=int, default=20, help="scenario 1: keys revoked to time the revocation's reach")
    parser.add_argument("--records-seconds", type=float, default=30.0, help="scenario 1: how long to wait for their work records")
    parser.add_argument(
        "--records-lease-seconds", type=float,
        help="scenario 1: WLM_RECORDS_LEASE_SECONDS, after which a survivor writes the records the killed scheduler left "
        "(default: the service's, at least 10 s)",
    )  # fmt: skip
    parser.add_argument(
        "--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="scenario 1's database server (a fresh database is created, and dropped at the end)",
    )  # fmt: skip
    parser.add_argument("--sqlite", action="store_true", help="scenario 1 on one SQLite file, even if PostgreSQL answers")
    parser.add_argument("--only", default="1,2,3", help="scenarios to run, e.g. 2,3 (the others' figures are null)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, AOFs, records)")
    parser.add_argument(
        "--side-by-side", action="store_true", help="after scenario 1, run scenario 2's modes and scenario 3 at once (a smoke run's way)"
    )
    args = parse_args(parser, SMOKE)
    args.only = {int(part) for part in args.only.split(",") if part.strip()}
    if min(args.seconds, args.requests, args.pairs, args.servers, args.revocations) <= 0:
        parser.error("--seconds, --requests, --pairs, --servers and --revocations must be positive")

    scratch = Path(tempfile.mkdtemp(prefix="wlm-chaos-"))
    say(f"machine: {machine()}; service, Redis, servers and load generator share it; scratch {scratch}")
    cleanup = Cleanup()
    signal.signal(signal.SIGTERM, interrupted)
    result: dict = {key: None for key in HEADLINE}
    failed = None
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args, scratch, cleanup, result))
    except KeyboardInterrupt:
        failed = "interrupted"
    except Exception as exc:
        traceback.print_exc()
        failed = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        say("stopping everything")
        cleanup.run()
        if args.keep or failed:
            say(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    result |= {
        "machine": f"{machine()}; the service, Redis, servers and load generator share these cores",
        "commit": commit(),
        "redis_server": redis_version(),
        "seconds": args.seconds,
        "elapsed_s": round(time.monotonic() - STARTED, 1),
    }
    if failed:
        result["error"] = failed
    conclude(result, checks(result.get("scenarios", {}), failed), args.smoke)


def checks(scenarios: dict, failed: str | None) -> dict[str, bool]:
    """What must hold of the scenarios that ran (see the docstring)."""
    passed = {"every scenario ran to its end": failed is None}
    if s1 := scenarios.get("two_replicas_under_chaos"):
        events = s1["events"]
        passed |= {
            "scenario 1: requests accepted": s1["accepted"] > 0,
            "scenario 1: none lost": s1["lost"] == 0,
            "scenario 1: none ran twice": s1["ran_twice"] == 0,
            "scenario 1: every accepted request has its work record": s1["records_missing"] == 0,
            "scenario 1: no negative duration": s1["negative_durations"] == 0,
            "scenario 1: no duty failure outside the Redis outage": s1["duty_failures_outside_redis_outage"] == 0,
            "scenario 1: a new scheduler after the kill": events["scheduler_kill"].get("failover_s") is not None,
            "scenario 1: the killed server held a request, another ended it": events["server_kill"]["done"]
            and events["server_kill"]["held_ended_by_another_server"] == events["server_kill"]["held"],
            "scenario 1: both replicas recovered from the Redis restart": not events["redis_kill"]["replicas_restarted_by_the_benchmark"],
        }
    for mode, crash in scenarios.get("host_crash", {}).items():
        if isinstance(crash, dict):  # not the reason it was skipped
            passed |= {
                f"scenario 2 ({mode}): requests accepted": crash["accepted"] > 0,
                f"scenario 2 ({mode}): inserts taken after the restart": not crash["replica_restarted_by_the_benchmark"],
            }
            if mode == "strict":
                passed["scenario 2 (strict): none lost"] = crash["lost"] == 0
    if s3 := scenarios.get("insert_cost"):
        passed["scenario 3: inserts in every phase"] = all(
            rate > 0 for modes in s3["rates_per_s"].values() for rates in modes.values() for rate in rates
        )
    return passed


if __name__ == "__main__":
    main()
