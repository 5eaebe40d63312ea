"""A Redis Cluster master killed under load: how long the service takes to serve again once the master's replica
is promoted, and how many inserts answered 201 were lost, in each durability mode.

    .venv/bin/python bench/redis_failover.py [--load-seconds 8] [--rate 200] [--node-timeout-ms 2000] [--workers 2]
                                             [--side-by-side]
    .venv/bin/python bench/redis_failover.py --smoke    # --load-seconds 1.5 --rate 60 --node-timeout-ms 1000 --workers 1
                                                        # --side-by-side

For each durability mode (fast, then strict; with --side-by-side both at once, each on its own cluster and service,
each disturbing the other's figures: a smoke run's way, half the wall time) it starts a Redis Cluster of 3 masters
with a replica each (the redis-server the embedded default uses, every node with `appendfsync always`;
tests/redis_cluster.py) and one `wlm serve` (--workers uvicorn workers) given the first master's URL. Eight
producers insert `--rate` requests a second between them, each with its own idempotency key; four servers select
(and begin) and end what they get. `--load-seconds` after the first request is accepted, the master holding the
PAYROLL queues is killed with SIGKILL; its replica takes over once the other masters have missed it for
`--node-timeout-ms` (Redis's `cluster-node-timeout`). The load goes on as long again, then the servers take what is
left: until every request answered 201 has ended, or none came for DRAIN_IDLE_SECONDS since the last insert was
answered (a lost one never comes, and an end whose answer the kill cut off is not known to have ended).

In strict mode an insert is answered 201 once the master's replica has it too (WAIT): none answered should be lost.
In fast mode, replication is asynchronous.

Reported per mode: the longest pause in inserts answered 201 and in requests selected (the outage the kill
caused), the seconds from the kill to `/readyz` answering 200 again (once it has said not ready), the inserts
refused meanwhile by status (or unanswered),
the inserts answered 201 whose request no server ever received (lost), and the requests a server received twice
(an end the outage refused lets the lease expire, and the request is delivered again: at least once). The service,
the six Redis nodes and this load generator share the machine's cores. The last line is one JSON object of the
figures, each named with its mode (`strict_lost`), the HEADLINE ones among them, and `failed_checks`. Checked, and
the exit status 1 if not so: in each mode a request was accepted, `/readyz` said ready again (within READY_SECONDS),
and every request answered 201 and received by a server has its completion record (waited for up to
RECORDS_SECONDS); in strict mode none was lost. (Fast mode may lose some: that is reported, not checked.)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from redis.crc import key_slot

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.queues.keys import AeKeys
from bench._records import without_record
from bench._service import Service, admin_setup, example_policy, machine
from bench._smoke import conclude, parse_args
from tests.redis_cluster import SLOTS, redis_cluster

HEADLINE = ("fast_insert_outage_s", "fast_ready_again_s", "fast_lost", "strict_insert_outage_s", "strict_ready_again_s", "strict_lost")
SMOKE = {"load_seconds": 1.5, "rate": 60.0, "node_timeout_ms": 1000, "workers": 1, "side_by_side": True}
MODES = ("fast", "strict")
MASTERS = 3
PREFIX = "wlm"  # the service's default WLM_REDIS_PREFIX
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
SERVER = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BENCH", "application_environment": "PAYROLL", "worker_tasks": 4}
DRAIN_IDLE_SECONDS = 10.0
READY_SECONDS = 60.0  # from the kill: not ready, then ready again
# The load's first accepted request, from its start: the seconds of load before the kill count from it, so that a
# slow start (a busy machine's first requests) does not leave nothing accepted before the kill.
FIRST_ACCEPTED_SECONDS = 60.0
RECORDS_SECONDS = 30.0
PRODUCERS = 8


class Load:
    def __init__(self, url: str, qm_key: str, server_key: str) -> None:
        self.url, self.qm_key, self.server_key = url, qm_key, server_key
        self.accepted: dict[str, float] = {}  # token: when its 201 came
        self.received: list[tuple[str, float]] = []  # (token, when a server got it)
        self.ended: set[str] = set()
        self.refused: Counter[str] = Counter()  # inserts not answered 201: by status, or "unanswered"
        self.stopping = asyncio.Event()  # the producers'
        # Set once the producers are done: an insert the outage held may still be answered 201 after `stopping`.
        self.inserted = asyncio.Event()
        self.last_receipt = time.monotonic()

    def client(self, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=httpx.Timeout(10, connect=2))

    async def produce(self, rate: float, qm_token: str) -> None:
        """One of PRODUCERS, each inserting at its share of the rate (one alone would be held to one insert per
        round trip)."""
        async with self.client(self.qm_key) as client:
            sent, started = 0, time.monotonic()
            while not self.stopping.is_set():
                await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
                sent += 1
                body = {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"},
                        "payload": {"n": sent}, "idempotency_key": uuid.uuid4().hex}  # fmt: skip
                try:
                    response = await client.post("/v1/work", json=body)
                except httpx.TransportError:
                    self.refused["unanswered"] += 1
                    continue
                if response.status_code == 201:
                    self.accepted[response.json()["token"]] = time.monotonic()
                else:
                    self.refused[str(response.status_code)] += 1

    async def serve(self) -> None:
        async with self.client(self.server_key) as client:
            token = None
            while not self.inserted.is_set() or (not self.drained() and time.monotonic() - self.last_receipt < DRAIN_IDLE_SECONDS):
                try:
                    if token is None:
                        token = (await client.post("/v1/connections", json=SERVER)).json()["token"]
                    response = await client.post(
                        "/v1/work/select", json={"connect_token": token, "wait_seconds": 0.5, "max_items": 4, "begin": True}
                    )
                    if response.status_code != 200:
                        if response.status_code == 404:  # the connection was lost with the master: connect again
                            token = None
                        await asyncio.sleep(0.05)
                        continue
                    now = time.monotonic()
                    for item in response.json()["items"]:
                        self.received.append((item["token"], now))
                        self.last_receipt = now
                        ended = await client.post(f"/v1/work/{item['token']}/end", json={"connect_token": token})
                        if ended.status_code == 200:
                            self.ended.add(item["token"])  # else its lease runs out, and it comes again
                except (httpx.TransportError, KeyError):
                    await asyncio.sleep(0.05)

    def drained(self) -> bool:
        return self.accepted.keys() <= self.ended


def outage(times: Iterable[float], killed_at: float) -> float | None:
    """The longest pause between two successes that ends after the kill: the seconds the service did not serve."""
    ordered = sorted(times)
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered) if later > killed_at]
    return round(max(gaps), 2) if gaps else None


def master_of(tag: str) -> int:
    return min(key_slot(tag.encode()) // (SLOTS // MASTERS), MASTERS - 1)


async def ready_again(url: str, since: float) -> float:
    """Seconds from `since` (the kill) until `/readyz` answers 200 again, once it has noticed the dead master."""
    async with httpx.AsyncClient(timeout=2) as client:

        async def ready() -> bool:
            try:
                return (await client.get(f"{url}/readyz")).status_code == 200
            except httpx.TransportError:
                return False

        for wanted in (False, True):
            while await ready() != wanted:
                if time.monotonic() - since > READY_SECONDS:
                    raise TimeoutError(
                        f"/readyz did not say {'ready again' if wanted else 'not ready'} within {READY_SECONDS} s of the kill"
                    )
                await asyncio.sleep(0.05)
        return time.monotonic() - since


async def run(service: Service, kill, load_seconds: float, rate: float) -> dict:
    qm_key, server_key = await admin_setup(service.url, example_policy(completion_time_ms=2000))
    load = Load(service.url, qm_key, server_key)
    async with load.client(qm_key) as qm:
        qm_token = (await qm.post("/v1/connections", json=QM)).json()["token"]
    servers = [asyncio.create_task(load.serve()) for _ in range(4)]
    producers = [asyncio.create_task(load.produce(rate / PRODUCERS, qm_token)) for _ in range(PRODUCERS)]
    deadline = time.monotonic() + FIRST_ACCEPTED_SECONDS
    while not load.accepted and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(load_seconds)
    kill()
    killed_at = time.monotonic()
    refused_before = load.refused.copy()
    ready = asyncio.create_task(ready_again(service.url, killed_at))
    await asyncio.sleep(load_seconds)
    load.stopping.set()
    await asyncio.gather(*producers)
    load.last_receipt = max(load.last_receipt, time.monotonic())  # the idle wait starts no earlier than now
    load.inserted.set()
    await asyncio.gather(*servers)
    ready_s = await ready
    received = [token for token, _ in load.received]
    return {
        "insert_outage_s": outage(load.accepted.values(), killed_at),
        "select_outage_s": outage((at for _, at in load.received), killed_at),
        "ready_again_s": round(ready_s, 2),
        "refused_after_kill": dict(load.refused - refused_before),
        "accepted": len(load.accepted),
        "lost": len(set(load.accepted) - set(received)),
        "received_without_record": len(await without_record(service.dir / "data", set(load.accepted) & set(received), RECORDS_SECONDS)),
        "received_twice": len(received) - len(set(received)),
    }


def one_mode(durability: str, args: argparse.Namespace) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix=f"wlm-redis-failover-{durability}-"))
    with redis_cluster(scratch / "cluster", MASTERS, replicas=1, node_timeout_ms=args.node_timeout_ms) as cluster:
        victim = cluster.masters[master_of(AeKeys(PREFIX, "LOCAL", "PAYROLL").tag)]
        service = Service(args.workers, directory=scratch / "service", redis_url=cluster.masters[0], durability=durability)
        try:
            figures = asyncio.run(run(service, lambda: cluster.kill(victim), args.load_seconds, args.rate))
        finally:
            service.stop()
        figures["tracebacks_in_log"] = (service.dir / "service.log").read_text(errors="replace").count("Traceback")
    print(f"{durability}: {json.dumps(figures)}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load-seconds", type=float, default=8.0, help="load before the kill, and again after it")
    parser.add_argument("--rate", type=float, default=200.0, help="requests inserted per second")
    parser.add_argument("--node-timeout-ms", type=int, default=2000, help="the cluster's cluster-node-timeout")
    parser.add_argument("--workers", type=int, default=2, help="the service's uvicorn workers")
    parser.add_argument("--side-by-side", action="store_true", help="run both modes at once (each its own cluster and service)")
    args = parse_args(parser, SMOKE)
    print(
        f"machine: {machine()}; the service (uvicorn workers: {args.workers}), 6 Redis nodes and this load generator share the cores",
        flush=True,
    )
    if args.side_by_side:
        with ThreadPoolExecutor(len(MODES)) as pool:
            results = dict(zip(MODES, pool.map(lambda mode: one_mode(mode, args), MODES), strict=True))
    else:
        results = {mode: one_mode(mode, args) for mode in MODES}
    headline = {f"{mode}_{name}": value for mode, figures in results.items() for name, value in figures.items()}
    checks = {
        f"{mode}: {name}": passed
        for mode, figures in results.items()
        for name, passed in (
            ("a request was accepted", figures["accepted"] > 0),
            ("every request accepted and received has its completion record", figures["received_without_record"] == 0),
        )
    }
    checks["strict: no request answered 201 lost"] = results["strict"]["lost"] == 0
    settings = {"node_timeout_ms": args.node_timeout_ms, "rate": args.rate, "workers": args.workers, "side_by_side": args.side_by_side}
    conclude({**settings, **headline}, checks, args.smoke)


if __name__ == "__main__":
    main()
