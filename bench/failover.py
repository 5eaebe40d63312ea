"""Three replicas under load; the elected scheduler is killed with SIGKILL (or frozen with SIGSTOP and woken once
replaced, `--pause`); another takes over.

    .venv/bin/python bench/failover.py [--load-seconds 6] [--rate 150] [--pause]
    .venv/bin/python bench/failover.py --smoke      # --load-seconds 1.5 --rate 50 --records-lease-seconds 3: the
                                                    # same steps and checks

Starts one redis-server (the project's embedded one) and three `wlm serve` replicas sharing it and one SQLite
database, the first with the highest scheduler weight. A producer inserts `--rate` requests a second through the
two other replicas; six servers (two on each replica) select, work 20 ms and end, each moving to another replica
when its own stops answering. After `--load-seconds` the scheduler's process is killed (SIGKILL: no resignation,
no last words) and the benchmark polls `GET /v1/scheduler` on the survivors every 20 ms until a new holder with a
new epoch shows: that is the failover time. The load goes on as long again, then every accepted request must end.

Checked and reported: every request accepted (201) has exactly one completion in the work records (copies of one
record, which at-least-once flushing may leave, are not two completions), none is missing; the event log (the
advisories stream) shows one holder per epoch with epochs rising (an epoch may be missing: a member that took the
role but lost it before its duties started never announced it, by design of app/scheduler/service.py); no duty of a
deposed scheduler was let through (fenced refusals counted from the logs). The records are waited for (up to
RECORDS_SECONDS): the killed scheduler's flush lease (WLM_RECORDS_LEASE_SECONDS, by default at least 10 s; 3 s in a
smoke run) must run out before a survivor writes what it left in the outbox.

The last line is one JSON object of the figures, the HEADLINE ones among them, and `failed_checks`: a failed check
(a request not ended, missing or completed twice, epochs not one holder each, no takeover, a woken scheduler that
did not stand down) makes the exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pyarrow.compute as pc
import redis

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.events.advisories import events_key  # noqa: E402
from app.redis.embedded import EmbeddedRedis  # noqa: E402
from app.work import records  # noqa: E402
from bench._service import ADMIN_KEY, Service, admin_setup, example_policy, machine  # noqa: E402
from bench._smoke import conclude, parse_args  # noqa: E402

HEADLINE = ("failover_s", "accepted", "missing", "completed_twice", "one_holder_per_epoch")
# The smoke run's records lease is shorter than the service's default (10 s), so that the records the killed scheduler
# left come sooner: the same steps. (A 0.5 s heartbeat and 2 s activation interval as well took members for dead
# under load 8: the smoke keeps the service's.)
SMOKE = {"load_seconds": 1.5, "rate": 50.0, "records_lease_seconds": 3.0}

PREFIX = "wlm"
WORK_SECONDS = 0.02
COMPLETION_TIME_MS = 2000
FAILOVER_SECONDS = 30  # no takeover this long after the kill: a failed check
DRAIN_SECONDS = 60
RECORDS_SECONDS = 30
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
SERVER = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BENCH", "application_environment": "PAYROLL", "worker_tasks": 4}


def policy() -> dict:
    # A request the dead replica left selected comes back soon.
    return example_policy(completion_time_ms=COMPLETION_TIME_MS)


class Cluster:
    def __init__(self, scratch: Path, settings: dict[str, str]) -> None:
        """`settings`: the replicas' (WLM_*, lower case, without the prefix) besides their Redis, database and weight."""
        self.redis = EmbeddedRedis(scratch)
        self.redis_url = self.redis.start()
        self.replicas: list[Service] = []
        shared = settings | {"redis_url": self.redis_url, "database_url": f"sqlite+aiosqlite:///{scratch / 'wlm.db'}"}
        try:
            # The first migrates the database (and, the heaviest, becomes the scheduler); the others start together.
            self.replicas.append(Service(scheduler_weight="90", **shared))
            with ThreadPoolExecutor() as pool:
                starting = [pool.submit(Service, scheduler_weight="50", **shared) for _ in range(2)]
            self.replicas += [future.result() for future in starting if future.exception() is None]
            for future in starting:
                future.result()  # raises what a start raised, once the others are in self.replicas to be stopped
        except BaseException:
            self.stop()  # what did start
            raise

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self.redis.stop()


class Load:
    def __init__(self, urls: list[str], qm_key: str, server_key: str) -> None:
        self.urls, self.qm_key, self.server_key = urls, qm_key, server_key
        self.accepted: set[str] = set()
        self.ended: list[str] = []
        self.refused = 0
        self.server_moves = 0
        self.stopping = asyncio.Event()  # the producer's
        self.finished = asyncio.Event()  # the servers': set once every accepted request ended, or given up on

    def client(self, url: str, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=httpx.Timeout(10, connect=2))

    async def produce(self, rate: float, qm_token: str, urls: list[str]) -> None:
        clients = [self.client(url, self.qm_key) for url in urls]
        sent, started = 0, time.monotonic()
        try:
            while not self.stopping.is_set():
                due = started + sent / rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                client = clients[sent % len(clients)]
                sent += 1
                body = {
                    "connect_token": qm_token,
                    "application_environment": "PAYROLL",
                    "classification": {"userid": "ATM01"},
                    "payload": {"n": sent},
                }
                try:
                    response = await client.post("/v1/work", json=body)
                except httpx.TransportError:
                    self.refused += 1
                    continue
                if response.status_code == 201:
                    self.accepted.add(response.json()["token"])
                else:
                    self.refused += 1
        finally:
            for client in clients:
                await client.aclose()

    async def serve(self, home: int) -> None:
        """One server: select, work, end; on a replica that stopped answering, the next one (same connection), where
        the ends not answered are sent again."""
        index = home
        client = self.client(self.urls[index], self.server_key)
        token = (await client.post("/v1/connections", json=SERVER)).json()["token"]
        unended: list[str] = []  # worked on, no answer to the end yet
        try:
            while not self.finished.is_set():
                try:
                    while unended:
                        ended = await client.post(f"/v1/work/{unended[0]}/end", json={"connect_token": token})
                        # Already ended: the end reached the killed replica, its answer did not come back.
                        if ended.status_code == 200 or ended.json().get("error", {}).get("code") == "already_ended":
                            self.ended.append(unended[0])
                        unended.pop(0)
                    response = await client.post(
                        "/v1/work/select", json={"connect_token": token, "wait_seconds": 0.5, "max_items": 4, "begin": True}
                    )
                    if response.status_code != 200:
                        continue
                    unended = [item["token"] for item in response.json()["items"]]
                    await asyncio.sleep(WORK_SECONDS)
                except httpx.TransportError:
                    await client.aclose()
                    index = (index + 1) % len(self.urls)
                    client = self.client(self.urls[index], self.server_key)
                    self.server_moves += 1
        finally:
            await client.aclose()

    def drained(self) -> bool:
        return self.accepted <= set(self.ended)


async def scheduler_of(url: str) -> dict:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=2) as client:
        return (await client.get(f"{url}/v1/scheduler")).json()  # type: ignore[no-any-return]


async def run(cluster: Cluster, load_seconds: float, rate: float, pause: bool) -> dict:
    urls = [replica.url for replica in cluster.replicas]
    qm_key, server_key = await admin_setup(urls[0], policy())
    load = Load(urls, qm_key, server_key)
    async with load.client(urls[1], qm_key) as qm:
        qm_token = (await qm.post("/v1/connections", json=QM)).json()["token"]
    servers = [asyncio.create_task(load.serve(i % 3)) for i in range(6)]
    producer = asyncio.create_task(load.produce(rate, qm_token, urls[1:]))
    await asyncio.sleep(load_seconds)

    before = await scheduler_of(urls[1])
    holder = next(m for m in before["members"] if m["member"] == before["holder"])
    victim = next(r for r in cluster.replicas if r.process.pid == holder["pid"])
    survivors = [r.url for r in cluster.replicas if r is not victim]
    # SIGKILL: dead for good. SIGSTOP: frozen, as by a long pause, and woken (SIGCONT) once replaced, when it must
    # find itself deposed and not act.
    os.kill(victim.process.pid, signal.SIGSTOP if pause else signal.SIGKILL)
    killed_at = time.monotonic()
    failover_s = None
    while failover_s is None and time.monotonic() - killed_at < FAILOVER_SECONDS:
        after = await scheduler_of(survivors[0])
        if after["holder"] not in (None, before["holder"]) and after["epoch"] > before["epoch"]:
            failover_s = time.monotonic() - killed_at
        await asyncio.sleep(0.02)
    how = "froze" if pause else "killed"
    took = f"after {failover_s:.2f} s" if failover_s is not None else f"not within {FAILOVER_SECONDS} s"
    said = f"{how} the scheduler {before['holder']} (epoch {before['epoch']}); {after['holder']} took over (epoch {after['epoch']})"
    print(f"{said} {took}", flush=True)
    if pause:
        await asyncio.sleep(1.0)
        os.kill(victim.process.pid, signal.SIGCONT)

    await asyncio.sleep(load_seconds)
    load.stopping.set()
    await producer
    deadline = time.monotonic() + DRAIN_SECONDS
    while not load.drained() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    drained = load.drained()
    load.finished.set()
    await asyncio.wait_for(asyncio.gather(*servers), timeout=30)
    deadline = time.monotonic() + RECORDS_SECONDS
    while (checked := await asyncio.to_thread(check_records, cluster, load.accepted))["missing"] and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    final = await scheduler_of(survivors[0])
    return {
        "failover_s": failover_s,
        "before": before,
        "after": after,
        "final": final,
        "load": load,
        "drained": drained,
        "checked": checked,
    }


def check_records(cluster: Cluster, accepted: set[str]) -> dict[str, int]:
    tables = [records.read(replica.dir / "data" / "records") for replica in cluster.replicas]
    completions: dict[str, set] = {}
    for table in tables:
        completed = table.filter(pc.equal(table["outcome"], "completed"))
        for token, ended_at, deliveries in zip(
            completed["token"].to_pylist(), completed["ended_at"].to_pylist(), completed["deliveries"].to_pylist(), strict=True
        ):
            completions.setdefault(token, set()).add((ended_at, deliveries))
    return {
        "accepted": len(accepted),
        "missing": sum(1 for token in accepted if token not in completions),
        "completed_twice": sum(1 for token in accepted if len(completions.get(token, ())) > 1),
        "redelivered": sum(1 for token in accepted if any(d > 1 for _, d in completions.get(token, ()))),
    }


def check_events(redis_url: str, deposed: str) -> tuple[list[int], bool, bool]:
    """The epochs of the ACTIVE advisories, whether each was held once in order, and whether `deposed` said it was
    no longer the scheduler (a frozen one does so when it wakes)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    entries = client.xrange(events_key(PREFIX))
    client.close()
    active = [json.loads(fields["data"]) for _, fields in entries if fields["subject"].startswith("WLM.INFO.SCHEDULER.ACTIVE.")]
    epochs = [event["epoch"] for event in active]
    # Strictly rising: no epoch announced twice (two holders) or out of order. A gap is an epoch taken and lost again
    # before its duties started, which is never announced.
    one_holder_per_epoch = all(a < b for a, b in zip(epochs, epochs[1:], strict=False)) and bool(epochs)
    # Its first word after waking is that it lost its epoch, before it takes any role again (being the heaviest, it
    # may: with a new epoch, once the holder has handed over).
    own = [
        (fields["subject"].split(".")[3], json.loads(fields["data"])) for _, fields in entries if fields["subject"].endswith(f".{deposed}")
    ]
    stood_down = len(own) >= 2 and own[0] == ("ACTIVE", own[0][1]) and own[1][0] == "INACTIVE" and own[1][1]["epoch"] == own[0][1]["epoch"]
    return epochs, one_holder_per_epoch, stood_down


def fenced_refusals(cluster: Cluster) -> int:
    return sum(
        (replica.dir / "service.log").read_text(errors="replace").count("refused: a newer scheduler acts") for replica in cluster.replicas
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load-seconds", type=float, default=6.0, help="load before the kill, and again after it")
    parser.add_argument("--rate", type=float, default=150.0, help="requests inserted per second")
    parser.add_argument(
        "--pause", action="store_true", help="freeze the scheduler (SIGSTOP) and wake it once replaced, instead of killing it"
    )
    parser.add_argument("--heartbeat-seconds", type=float, help="WLM_SCHEDULER_HEARTBEAT_SECONDS (default: the service's)")
    parser.add_argument("--activation-seconds", type=float, help="WLM_SCHEDULER_ACTIVATION_SECONDS (default: the service's)")
    parser.add_argument("--records-lease-seconds", type=float, help="WLM_RECORDS_LEASE_SECONDS (default: the service's)")
    args = parse_args(parser, SMOKE)
    print(f"machine: {machine()}; three replicas, Redis and this load generator share the cores", flush=True)
    given = {
        "scheduler_heartbeat_seconds": args.heartbeat_seconds,
        "scheduler_activation_seconds": args.activation_seconds,
        "records_lease_seconds": args.records_lease_seconds,
    }
    settings = {name: str(value) for name, value in given.items() if value is not None}
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="wlm-failover-")), settings)
    try:
        result = asyncio.run(run(cluster, args.load_seconds, args.rate, args.pause))
        load: Load = result["load"]
        checked = result["checked"]
        epochs, one_holder_per_epoch, stood_down = check_events(cluster.redis_url, result["before"]["holder"])
        activation = result["after"]["activation_interval_s"]
    finally:
        cluster.stop()
    print(
        f"accepted {checked['accepted']:,} requests ({load.refused} refused "
        f"or unanswered), servers moved replica {load.server_moves} times",
        flush=True,
    )
    print(
        f"records: {checked['missing']} missing, {checked['completed_twice']} "
        f"completed twice, {checked['redelivered']} delivered again after the kill",
        flush=True,
    )
    failover_s = result["failover_s"]
    figures = {
        "failover_s": failover_s and round(failover_s, 2),
        "activation_interval_s": activation,
        "heartbeat_interval_s": result["after"]["heartbeat_interval_s"],
        "accepted": checked["accepted"],
        "missing": checked["missing"],
        "completed_twice": checked["completed_twice"],
        "redelivered_after_kill": checked["redelivered"],
        "ended_exactly_once": checked["missing"] == 0 and checked["completed_twice"] == 0,
        "epochs": epochs,
        "one_holder_per_epoch": one_holder_per_epoch,
        "fenced_refusals": fenced_refusals(cluster),
        "mode": "pause" if args.pause else "kill",
        "service_settings": settings,
    }
    if args.pause:
        # The woken one found itself replaced and said so before acting again; no duty of its old epoch got through.
        figures["woken_scheduler_stood_down"] = stood_down
        figures["final_holder_weight"] = result["final"]["weight"]
    checks = {
        "a request was accepted": checked["accepted"] > 0,
        f"a new scheduler within {FAILOVER_SECONDS} s": failover_s is not None,
        f"every accepted request ended within {DRAIN_SECONDS} s": result["drained"],
        "no accepted request without its completion record": checked["missing"] == 0,
        "no request completed twice": checked["completed_twice"] == 0,
        "one holder per epoch, epochs rising": one_holder_per_epoch,
    }
    if args.pause:
        checks["the woken scheduler stood down"] = stood_down
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
