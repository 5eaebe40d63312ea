"""The slow queue sweeper under a large backlog: Redis memory with and without it, and the order on the way out.

    .venv/bin/python bench/sweeper.py [--requests 1000000] [--payload-bytes 1024] [--rate 3000] [--interval 5]
    .venv/bin/python bench/sweeper.py --smoke     # seconds: 3,000 requests, a pass every 0.5 s

Starts the service (`wlm serve`, its embedded Redis, SQLite) twice. Each time one queue manager inserts
`--requests` requests of about `--payload-bytes` each at `--rate` a second (batches of 500, one after another, so
the insertion order is the payloads' numbers) while one slow server takes one request every 100 ms; a sampler reads Redis `used_memory`
every 250 ms. The first run has the sweeper on (every `--interval` s, the product's default 5 s): the most Redis
holds should stay near what arrives in one interval plus the buffer, not grow with the backlog (the peak is taken
while the backlog builds up; draining, the buffer is the high service rate + 5, reported apart). Once two passes
have begun after the last insert (the first has then swept what came last), one fast server drains the queue
(select up to 1000 and end the previous 1000 in the same call): every request must come out once, in insertion
order. The second run has the sweeper off and is stopped once the backlog is in: its memory grows with the backlog.
As the yardstick, raw Redis: the same payloads RPUSHed to one list of a fresh redis-server.

Every run checks that each request came out once, in order, and was ended, that the sweeper moved requests to the
database, and that the figures are above 0; a failed check makes the exit status 1. `--smoke` is the same run with
3,000 requests and a sweeper pass every 0.5 s. Service, load generator and Redis share this machine's cores. The last
line is one JSON object of the figures (those named in HEADLINE among them), the checks that failed and whether this
was a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import redis
import yaml

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.queues.keys import AeKeys  # noqa: E402
from app.redis.embedded import EmbeddedRedis  # noqa: E402
from bench._http import HttpClient  # noqa: E402
from bench._service import ADMIN_KEY, ROOT, Service, machine  # noqa: E402
from bench._smoke import above_zero, conclude, parse_args  # noqa: E402

HEADLINE = (
    "redis_mb_swept",
    "redis_mb_unswept",
    "unswept_over_swept",
    "raw_redis_list_mb",
    "order_preserved",
    "exactly_once",
    "inserts_per_s_swept",
    "drained_per_s",
    "swept_at_end_of_fill",
)
SMOKE = {"requests": 3000, "interval": 0.5}
# The environment's keys in the service's Redis: the default prefix, the example policy's node.
PAYROLL = AeKeys("wlm", "LOCAL", "PAYROLL")
BATCH = 500
SLOW_SELECT_SECONDS = 0.1
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BENCH"}
SERVER = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BENCH", "application_environment": "PAYROLL"}


COMPLETION_TIME_MS = 600_000
# Tombstones must outlive the longest completion time, the heartbeat timeout (30 s) and the margin (60 s).
TOMBSTONE_SECONDS = COMPLETION_TIME_MS // 1000 + 120


def policy(backlog: int) -> str:
    document = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    for ae in document["application_environments"]:
        ae.pop("start_command", None)
        ae["backlog_limit"] = backlog
        ae["completion_time_ms"] = COMPLETION_TIME_MS  # nothing is given back during the run
    return json.dumps(document)


def payload(n: int, size: int) -> dict[str, object]:
    return {"n": n, "data": "x" * max(0, size - 20)}


class MemorySampler:
    """`used_memory` of a Redis every 250 ms, in a thread (the asyncio loop is busy with the load)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.peak = self.last = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(0.25):
            self.last = int(self.client.info("memory")["used_memory"])
            self.peak = max(self.peak, self.last)
            self.samples.append((time.monotonic() - started, self.last))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()


async def setup(url: str, backlog: int) -> tuple[str, str, str]:
    """Policy, keys, a queue manager's connection: (qm key, server key, qm token)."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
        (await admin.put("/v1/policy", content=policy(backlog), headers={"Content-Type": "application/json"})).raise_for_status()
        keys = []
        for name, roles, permits in (("qm", ["queue_manager"], []), ("srv", ["server"], ["CB.**"])):
            (await admin.post("/v1/principals", json={"name": name, "roles": roles, "permits": permits})).raise_for_status()
            keys.append((await admin.post("/v1/api-keys", json={"principal": name})).json()["key"])
        qm = await admin.post("/v1/connections", json=QM, headers={"Authorization": f"Bearer {keys[0]}"})
        qm.raise_for_status()
    return keys[0], keys[1], qm.json()["token"]


async def connect_server(client: HttpClient, tasks: int) -> str:
    status, body = await client.post("/v1/connections", {**SERVER, "worker_tasks": tasks})
    assert status == 201, body
    return str(body["token"])


async def fill(url: str, qm_key: str, server_key: str, qm_token: str, args: argparse.Namespace) -> tuple[float, list[int], int]:
    """Insert `--requests` in order at `--rate` a second while a slow server takes one every 100 ms; (insert
    seconds, numbers it took, how many of them it ended)."""
    requests, size = args.requests, args.payload_bytes
    qm, server = HttpClient(url, qm_key), HttpClient(url, server_key)
    token = await connect_server(server, 1)
    taken: list[int] = []
    ended = 0
    done = asyncio.Event()

    async def slow_server() -> None:
        nonlocal ended
        held: list[str] = []
        while not done.is_set():
            status, body = await server.post(
                "/v1/work/select", {"connect_token": token, "max_items": 1, "end": [{"token": t} for t in held]}
            )
            assert status in (200, 204), body
            held = []
            if status == 200:
                ended += len(body["ended"])
                for item in body["items"]:
                    taken.append(item["payload"]["n"])
                    held.append(item["token"])
            await asyncio.sleep(SLOW_SELECT_SECONDS)
        for request in held:
            status, body = await server.post(f"/v1/work/{request}/end", {"connect_token": token})
            assert status == 200, body
            ended += 1

    slow = asyncio.create_task(slow_server())
    started = time.monotonic()
    for first in range(0, requests, BATCH):
        await asyncio.sleep(max(0.0, started + first / args.rate - time.monotonic()))
        items = [{"classification": {"userid": "ATM01"}, "payload": payload(n, size)} for n in range(first, min(first + BATCH, requests))]
        status, body = await qm.post("/v1/work:batch", {"connect_token": qm_token, "application_environment": "PAYROLL", "items": items})
        assert status == 201, body
    seconds = time.monotonic() - started
    done.set()
    await slow
    await qm.close()
    await server.close()
    return seconds, taken, ended


def await_passes(redis_url: str, passes: int, timeout: float) -> None:
    """Until `passes` passes of the sweeper have begun from now on: each begins by taking the service rates, which
    sets the served hash's `since` to Redis's time (so a pass that began is the end of the one before)."""
    with redis.Redis.from_url(redis_url) as client:
        now_s, now_us = client.time()
        last, deadline = now_s * 1000 + now_us // 1000, time.monotonic() + timeout
        for _ in range(passes):
            while (began := int(client.hget(PAYROLL.served, "since") or 0)) <= last:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{passes} sweeper passes did not begin within {timeout:g} s")
                time.sleep(0.05)
            last = began


async def drain(url: str, server_key: str) -> tuple[float, list[int], int]:
    """One fast server takes everything: (seconds, numbers in the order they came, how many it ended)."""
    client = HttpClient(url, server_key)
    token = await connect_server(client, 1000)
    order: list[int] = []
    held: list[str] = []
    ended = 0
    started = time.monotonic()
    while True:
        status, body = await client.post(
            "/v1/work/select", {"connect_token": token, "max_items": 1000, "end": [{"token": t} for t in held]}
        )
        held = []
        if status == 204:
            break
        assert status == 200, body
        ended += len(body["ended"])
        for item in body["items"]:
            order.append(item["payload"]["n"])
            held.append(item["token"])
        if not held:
            break
    seconds = time.monotonic() - started
    await client.close()
    return seconds, order, ended


def raw_redis_mb(requests: int, size: int) -> float:
    """The yardstick: the same payloads as JSON in one Redis list, nothing else."""
    scratch = Path(tempfile.mkdtemp(prefix="wlm-bench-raw-"))
    server = EmbeddedRedis(scratch)
    client = redis.Redis.from_url(server.start())
    try:
        base = int(client.info("memory")["used_memory"])
        for first in range(0, requests, 10_000):
            client.rpush("queue", *(json.dumps(payload(n, size)) for n in range(first, min(first + 10_000, requests))))
        return (int(client.info("memory")["used_memory"]) - base) / 1e6
    finally:
        client.close()
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def swept_figures(redis_url: str) -> dict[str, int]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        return {"swept_at_end_of_fill": sum(int(v) for key in client.scan_iter("*:swept") for v in client.hvals(key))}
    finally:
        client.close()


def tombstones_mb(redis_url: str) -> float:
    """What ended requests leave for WLM_TOMBSTONE_SECONDS (so a late caller is told "already ended"): the tombstones'
    buckets, and the form before them."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        keys = [key for pattern in ("*:done", "*:done_exp", "*:done:[0-9]") for key in client.scan_iter(pattern)]
        return round(sum(client.memory_usage(key, samples=0) or 0 for key in keys) / 1e6, 1)
    finally:
        client.close()


def metric(url: str, name: str) -> float:
    """A counter's total over its labels, from /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " "))


def run(with_sweeper: bool, args: argparse.Namespace) -> dict[str, object]:
    settings = {
        "sweeper_enabled": "true" if with_sweeper else "false",
        "sweeper_interval_seconds": str(args.interval),
        "tombstone_seconds": str(TOMBSTONE_SECONDS),
    }
    service = Service(**settings)
    try:
        qm_key, server_key, qm_token = asyncio.run(setup(service.url, args.requests + 1))
        base = int(redis.Redis.from_url(service.redis_url).info("memory")["used_memory"])
        sampler = MemorySampler(service.redis_url)
        insert_s, taken, ended = asyncio.run(fill(service.url, qm_key, server_key, qm_token, args))
        if with_sweeper:
            await_passes(service.redis_url, 2, timeout=10 * args.interval + 60)
        figures: dict[str, object] = {"insert_s": round(insert_s, 1), "inserts_per_s": round(args.requests / insert_s)}
        figures["backlog"] = args.requests - len(taken)
        figures["redis_mb_base"] = round(base / 1e6, 1)
        figures["redis_mb_peak"] = round(sampler.peak / 1e6, 1)  # while the backlog built up
        figures["redis_mb_after_fill"] = round(sampler.last / 1e6, 1)
        sampler.peak = 0
        if with_sweeper:
            figures |= swept_figures(service.redis_url)
            drain_s, order, drained = asyncio.run(drain(service.url, server_key))
            figures["ended"] = ended + drained
            figures["sweeps_aborted"] = metric(service.url, "wlm_sweeper_aborted_total")
            figures["drain_s"] = round(drain_s, 1)
            figures["drained_per_s"] = round(len(order) / drain_s) if drain_s else 0
            out = taken + order
            figures["exactly_once"] = sorted(out) == list(range(args.requests))
            figures["order_preserved"] = out == list(range(args.requests))
            # Draining, the buffer is the (high) service rate + 5 by the slow queue sweeper's rule, and blobs come back.
            figures["redis_mb_peak_draining"] = round(sampler.peak / 1e6, 1)
            figures["redis_mb_tombstones_after_drain"] = tombstones_mb(service.redis_url)
        sampler.stop()
        figures["memory_samples"] = [(round(t, 1), round(m / 1e6, 1)) for t, m in sampler.samples[:: max(1, len(sampler.samples) // 40)]]
        return figures
    finally:
        service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--payload-bytes", type=int, default=1024)
    parser.add_argument("--rate", type=float, default=3000, help="requests inserted a second (batches of 500)")
    parser.add_argument("--interval", type=float, default=5.0, help="the sweeper's interval (s)")
    args = parse_args(parser, SMOKE)
    print(f"# {machine()}; service, load generator and Redis share these cores", flush=True)
    swept = run(True, args)
    print("# with the sweeper:", json.dumps(swept), flush=True)
    unswept = run(False, args)
    print("# without the sweeper:", json.dumps(unswept), flush=True)
    raw = raw_redis_mb(args.requests, args.payload_bytes)
    print(f"# raw Redis, the same payloads in one list: {raw:.1f} MB", flush=True)
    summary = {
        "requests": args.requests,
        "payload_bytes": args.payload_bytes,
        "sweeper_interval_s": args.interval,
        "insert_rate_asked": args.rate,
        "backlog": swept["backlog"],
        "redis_mb_swept": swept["redis_mb_peak"],
        "redis_mb_unswept": unswept["redis_mb_peak"],
        "unswept_over_swept": round(float(unswept["redis_mb_peak"]) / float(swept["redis_mb_peak"]), 1),  # type: ignore[arg-type]
        "raw_redis_list_mb": round(raw, 1),
        "order_preserved": swept["order_preserved"],
        "exactly_once": swept["exactly_once"],
        "inserts_per_s_swept": swept["inserts_per_s"],
        "inserts_per_s_unswept": unswept["inserts_per_s"],
        "drained_per_s": swept["drained_per_s"],
        "redis_mb_swept_draining": swept["redis_mb_peak_draining"],
        "redis_mb_tombstones_after_drain": swept["redis_mb_tombstones_after_drain"],
        "swept_at_end_of_fill": swept["swept_at_end_of_fill"],
    }
    checks = {
        "every request came out once": swept["exactly_once"] is True,
        "in insertion order": swept["order_preserved"] is True,
        f"every request ended ({swept['ended']} of {args.requests})": swept["ended"] == args.requests,
        **above_zero(summary, [name for name in HEADLINE if not isinstance(summary[name], bool)]),
    }
    conclude(summary, checks, args.smoke)


if __name__ == "__main__":
    main()
