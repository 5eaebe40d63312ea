"""What ended requests leave in Redis (issue 41, point 4: bounded memory at any rate): tombstones per ended request, in
their buckets and in the form before them, and what a steady rate keeps.

    .venv/bin/python bench/tombstones.py [--requests 100000] [--rate 2000]
    .venv/bin/python bench/tombstones.py --smoke     # 2,000 requests

`--requests` requests (ids as inserts make them) are inserted, selected and ended in batches of 1,000 through the
queue store on a Redis of its own (embedded), with the default WLM_TOMBSTONE_SECONDS; `MEMORY USAGE` (every sample)
of the tombstones' buckets, divided by the requests, is `bytes_per_ended`. The same ids are then written as the
version before buckets wrote them (`<outcome>|<queue manager>` in `{…}:done`, the expiry in `{…}:done_exp`), measured
alike: `bytes_per_ended_before`. At `--rate` ends a second, a bucket's tombstones are kept from the bound to a third
longer, so Redis holds at most `rate × 4/3 × bound` of them (`steady_mb_at_rate`, reached after 4/3 of the bound and
then flat: the same after ten minutes and after an hour), where the form before held `rate × 3,600 s` after an
hour (`hour_mb_at_rate_before`). The last line is one JSON object of the figures (those named in HEADLINE among them)
and the checks that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from app.config import Settings
from app.queues.base import AeConfig
from app.queues.keys import TOMBSTONE_BUCKETS, AeKeys
from app.queues.request_meta import RequestMeta
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, NewRequest
from app.redis.embedded import EmbeddedRedis
from bench._service import machine
from bench._smoke import above_zero, conclude, parse_args

HEADLINE = ("bytes_per_ended", "bytes_per_ended_before", "steady_mb_at_rate", "hour_mb_at_rate_before")
SMOKE = {"requests": 2_000}
BATCH = 1_000
BEFORE_HOUR_S = 3_600  # WLM_TOMBSTONE_SECONDS before buckets
SERVER, QUEUE_MANAGER = 7, 12


async def memory(redis: Redis, keys: list[str]) -> int:
    return sum([await redis.memory_usage(key, samples=0) or 0 for key in keys])


async def drain(store: QueueStore, k: AeKeys, count: int) -> list[str]:
    """`count` requests inserted, selected and ended; their ids."""
    config = AeConfig(class_order=("ONLINE",), completion_time_ms=30_000, backlog_limit=10**9, max_deliveries=2)
    await store.register_server(k, SERVER, worker_tasks=BATCH, worker_weight=1, overflow=False)
    ended: list[str] = []
    while len(ended) < count:
        meta = {"sc": "ONLINE", "dep": False, "qm": QUEUE_MANAGER, "state": "q", "deliveries": 0, "exit": ""}
        batch = min(BATCH, count - len(ended))
        requests = [NewRequest(secrets.token_urlsafe(12), "ONLINE", False, RequestMeta(dict(meta)), "{}", None) for _ in range(batch)]
        await store.insert(k, QUEUE_MANAGER, requests, config.backlog_limit)
        items = (await store.select(k, config, SERVER, batch, begin=True)).items
        results = await store.end(k, SERVER, [EndArgs(item.id, "completed") for item in items])
        assert all(result.code == 0 for result in results)
        ended += [item.id for item in items]
    return ended


async def measure(url: str, args: argparse.Namespace, bound_s: int) -> dict[str, Any]:
    redis = Redis.from_url(url, decode_responses=True)
    store = QueueStore(redis, "wlm", idempotency_ttl_s=60, tombstone_ms=bound_s * 1000, samples_ms=60_000)
    k = store.keys("LOCAL", "PAYROLL")
    try:
        ids = await drain(store, k, args.requests)
        buckets = await memory(redis, k.tombstones)
        for first in range(0, len(ids), BATCH):  # the same ids as the version before buckets kept them
            page = ids[first : first + BATCH]
            await redis.hset(k.done, mapping={request_id: f"completed|{QUEUE_MANAGER}" for request_id in page})
            await redis.zadd(k.done_exp, {request_id: 1 for request_id in page})
        before = await memory(redis, [k.done, k.done_exp])
    finally:
        await store.aclose()
        await redis.aclose()
    per_ended, per_ended_before = buckets / len(ids), before / len(ids)
    kept_s = bound_s * TOMBSTONE_BUCKETS / (TOMBSTONE_BUCKETS - 1)
    return {
        "requests": len(ids),
        "tombstone_seconds": bound_s,
        "rate": args.rate,
        "bytes_per_ended": round(per_ended, 1),
        "bytes_per_ended_before": round(per_ended_before, 1),
        "steady_mb_at_rate": round(args.rate * kept_s * per_ended / 1e6, 1),
        "hour_mb_at_rate_before": round(args.rate * BEFORE_HOUR_S * per_ended_before / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000, help="requests inserted, selected and ended")
    parser.add_argument("--rate", type=float, default=2_000, help="ends a second for the steady-state figures")
    args = parse_args(parser, SMOKE)
    print(f"machine: {machine()}; Redis embedded, driven from this process", flush=True)
    bound_s = Settings(_env_file=None).tombstone_seconds
    with tempfile.TemporaryDirectory() as directory:
        embedded = EmbeddedRedis(Path(directory), "fast")
        try:
            figures = asyncio.run(measure(embedded.start(), args, bound_s))
        finally:
            embedded.stop()
    print(
        f"{figures['bytes_per_ended']} B a tombstone in buckets, {figures['bytes_per_ended_before']} B in the form before; "
        f"at {args.rate:,.0f} ends/s: at most {figures['steady_mb_at_rate']} MB, against {figures['hour_mb_at_rate_before']} MB "
        "after an hour before",
        flush=True,
    )
    checks = above_zero(figures, HEADLINE) | {"smaller than before": figures["bytes_per_ended"] < figures["bytes_per_ended_before"]}
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
