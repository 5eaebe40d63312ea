"""What resource groups add to a lifecycle's CPU, in the queue store's own calls (issue 41, point 2): the service's
Python and Redis's, without HTTP, so that a loaded machine moves it little (bench/lifecycle.py's `--resource-groups`
rates move with the load far more than the groups move them).

    .venv/bin/python bench/group_cost.py [--lifecycles 3200] [--rounds 5]
    .venv/bin/python bench/group_cost.py --smoke     # 160 lifecycles, 1 round

This process holds a queue store on a Redis of its own (embedded, used by nothing else), and runs the lifecycles of
bench/lifecycle.py's single phase through it: 16 servers, each inserting one request, then selecting one (begun) and
ending the one before in the same select; and of its batch phase: 4 servers selecting up to 250 and ending them in
the next select; and, as `empty`, its long-polling servers' selects that find nothing (about one in two of the
single phase's over HTTP): 16 servers selecting one from an empty environment. Each round runs them with none of the
three classes in a resource group, then with each in a group of its own, capped where no run comes. Reported per
lifecycle (per select for `empty`), the median over the rounds: this process's CPU (ms) and Redis's (INFO), with and
without groups, and what the groups add. The last line is one JSON object of the
figures (those named in HEADLINE among them) and the checks that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from redis.asyncio import Redis

from app.queues.base import AeConfig, GroupCap
from app.queues.request_meta import RequestMeta
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, NewRequest
from app.redis.embedded import EmbeddedRedis
from bench._service import machine
from bench._smoke import above_zero, conclude, parse_args

HEADLINE = (
    "groups_added_ms_single",
    "groups_added_python_ms_single",
    "groups_added_redis_ms_single",
    "groups_added_ms_batch",
    "groups_added_ms_empty",
)
SMOKE = {"lifecycles": 160, "rounds": 1}
CLASSES = ("ONLINE", "BATCH", "REPORTS")
NONE = AeConfig(class_order=CLASSES, completion_time_ms=60_000, backlog_limit=10**7, max_deliveries=2, class_ranks=(1, 2, 3))
GROUPED = replace(NONE, class_groups=tuple(GroupCap(sc, 1_000_000, None) for sc in CLASSES))
PHASES = {"single": (16, 1), "batch": (4, 250), "empty": (16, 1)}  # servers, items per select


def new_request() -> NewRequest:
    meta = {"sc": "ONLINE", "dep": False, "qm": 1, "state": "q", "deliveries": 0, "exit": ""}
    return NewRequest(uuid.uuid4().hex, "ONLINE", False, RequestMeta(meta), '{"n": 1}', None)


async def redis_cpu_s(redis: Redis) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def run(store: QueueStore, redis: Redis, config: AeConfig, phase: str, lifecycles: int) -> tuple[float, float]:
    """This process's and Redis's CPU (ms) per lifecycle of `phase` (per select for `empty`), each server on a place
    of its own."""
    servers, batch = PHASES[phase]
    k = store.keys("LOCAL", f"P{uuid.uuid4().hex[:8]}")
    selects = max(2, lifecycles // (servers * batch))  # the first select of each server ends nothing
    for server in range(servers):
        await store.register_server(k, server, worker_tasks=batch, worker_weight=1, overflow=False)
    if batch > 1:
        for _ in range(servers * selects * batch // 500 + 1):
            await store.insert(k, 1, [new_request() for _ in range(500)], config.backlog_limit)

    async def serve(server: int) -> int:
        held: list[str] = []
        counted = 0  # lifecycles ended, or selects that found nothing
        for _ in range(selects):
            if phase == "empty":
                assert not (await store.select(k, config, server, batch, begin=True)).items
                counted += 1
                continue
            if batch == 1:
                await store.insert(k, 1, [new_request()], config.backlog_limit)
            result = await store.select(k, config, server, batch, begin=True, ends=[EndArgs(i, "completed") for i in held])
            counted += sum(1 for end in result.ended if end.code == 0)
            held = [item.id for item in result.items]
        return counted

    python, redis_before = time.process_time(), await redis_cpu_s(redis)
    counted = sum(await asyncio.gather(*(serve(server) for server in range(servers))))
    python, redis_ms = time.process_time() - python, await redis_cpu_s(redis) - redis_before
    return python * 1000 / max(counted, 1), redis_ms * 1000 / max(counted, 1)


async def main_async(args: argparse.Namespace) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="wlm-group-cost-"))
    redis_server = EmbeddedRedis(directory, durability="fast")
    redis = Redis.from_url(redis_server.start(), decode_responses=True)
    store = QueueStore(redis, "bench", idempotency_ttl_s=60, tombstone_ms=60_000, samples_ms=60_000)
    figures: dict[str, float] = {}
    try:
        for phase in PHASES:
            await run(store, redis, NONE, phase, args.lifecycles // 10)  # warm-up: scripts loaded, connections open
            await run(store, redis, GROUPED, phase, args.lifecycles // 10)
            measured: dict[str, list[tuple[float, float]]] = {"none": [], "groups": []}
            for _ in range(args.rounds):
                measured["none"].append(await run(store, redis, NONE, phase, args.lifecycles))
                measured["groups"].append(await run(store, redis, GROUPED, phase, args.lifecycles))
            for name, runs in measured.items():
                figures[f"{name}_python_ms_{phase}"] = round(statistics.median(p for p, _ in runs), 4)
                figures[f"{name}_redis_ms_{phase}"] = round(statistics.median(r for _, r in runs), 4)
            python = figures[f"groups_python_ms_{phase}"] - figures[f"none_python_ms_{phase}"]
            redis_ms = figures[f"groups_redis_ms_{phase}"] - figures[f"none_redis_ms_{phase}"]
            figures |= {
                f"groups_added_python_ms_{phase}": round(python, 4),
                f"groups_added_redis_ms_{phase}": round(redis_ms, 4),
                f"groups_added_ms_{phase}": round(python + redis_ms, 4),
            }
            print(f"{phase}: groups add {python:.3f} ms of Python and {redis_ms:.3f} ms of Redis per lifecycle", flush=True)
    finally:
        await store.aclose()
        await redis.aclose()
        redis_server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifecycles", type=int, default=3200, help="lifecycles per phase, configuration and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of none then groups; the figures are their medians")
    args = parse_args(parser, SMOKE)
    print(machine(), flush=True)
    figures = asyncio.run(main_async(args))
    names = [f"{name}_{kind}_ms_{phase}" for name in ("none", "groups") for kind in ("python", "redis") for phase in PHASES]
    conclude(figures, above_zero(figures, names), args.smoke)


if __name__ == "__main__":
    main()
