"""The end scripts count each ended request in its class period's report buckets (lua/includes/end_held.lua `histograms`):
checked against the period and bucket the work record's own times give, with a goal of a few milliseconds so that
requests fall in different buckets and periods."""

from __future__ import annotations

import random

from app.queues.transitions import EndArgs
from spark_jobs.contract.goals import TOLERANT_BUCKET_LIMITS_PCT
from spark_jobs.manager.goals import period_number
from tests.queues.conftest import CONFIG, SERVER, request
from tests.waiting import eventually

# ONLINE's first period lasts 2 s of response, with a goal of 8 ms (its buckets end at 4, 4.8 ... 32 ms); its second
# has no response time goal.
FIRST_PERIOD_MS = 2000
GOAL_MS = 8
SPEC = f"{FIRST_PERIOD_MS}|{GOAL_MS};|"


def _bucket(value: int) -> int:
    """As the nightly report buckets a response (spark_jobs/workload_activity/transform.py), 1-based."""
    return next(
        (i for i, limit in enumerate(TOLERANT_BUCKET_LIMITS_PCT, 1) if value * 100 / GOAL_MS <= limit), len(TOLERANT_BUCKET_LIMITS_PCT) + 1
    )


async def test_each_end_is_counted_in_the_bucket_and_period_its_times_give(store, k):
    await store.results.publish_buckets(k, {"ONLINE": SPEC})
    await store.register_server(k, SERVER, worker_tasks=50, worker_weight=1, overflow=False)
    ids = [(await store.insert(k, 1, [request()], 100))[0] for _ in range(30)]
    selected = (await store.select(k, CONFIG, SERVER, 50, begin=True)).items
    assert len(selected) == len(ids)
    expected: dict[str, int] = {}
    random.shuffle(selected)
    last_inserted = max(item.meta["inserted"] for item in selected)
    for n, item in enumerate(selected):  # one at a time, so that their times spread over several milliseconds
        if n == len(selected) // 2:  # the rest past the first period
            await eventually(lambda: _past(store, last_inserted + FIRST_PERIOD_MS), 30, what="Redis's clock past the first period")
        [ended] = await store.end(k, SERVER, [EndArgs(item.id, "completed")])
        record = ended.record
        response, queue, execution = (
            record["ended"] - record["inserted"],
            record["selected"] - record["inserted"],
            record["ended"] - record["selected"],
        )
        period = period_number([FIRST_PERIOD_MS, None], response)
        if period == 1:
            for kind, value in (("r", response), ("q", queue), ("e", execution)):
                field = f"ONLINE|1|{kind}|{_bucket(value)}"
                expected[field] = expected.get(field, 0) + 1
                expected[f"ONLINE|1|{kind}|sum"] = expected.get(f"ONLINE|1|{kind}|sum", 0) + value
    counted = {field: int(n) for field, n in (await store.redis.hgetall(k.histograms)).items()}
    assert counted == expected
    in_first_period = sum(n for field, n in counted.items() if field.startswith("ONLINE|1|r|") and not field.endswith("sum"))
    assert 0 < in_first_period <= len(selected) // 2  # the later half is in the second period, which has no buckets


async def _past(store, ms: int) -> bool:
    return await store.clock_ms() > ms
