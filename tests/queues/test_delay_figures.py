"""The delay samples' read of an environment on a node (app/queues/delay_figures.py), on a real Redis: the requests
held per class period, each one counted while no more than HELD_SAMPLE are held, a random sample of them scaled to
all beyond (so that a sample's cost stays bounded however many are held)."""

from __future__ import annotations

import math
from dataclasses import replace

from app.queues.delay_figures import HELD_SAMPLE
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both

ROOMY = replace(CONFIG, backlog_limit=10_000)


async def held(store: QueueStore, k: AeKeys, per_class: dict[str, int]) -> None:
    """Requests of each class inserted, then selected and begun by one server."""
    total = sum(per_class.values())
    await store.register_server(k, SERVER, worker_tasks=total, worker_weight=1, overflow=False)
    for service_class, count in per_class.items():
        await store.insert(k, QUEUE_MANAGER, [request(service_class) for _ in range(count)], ROOMY.backlog_limit)
    taken = 0
    while taken < total:
        taken += len((await store.select(k, ROOMY, SERVER, 500, begin=True)).items)


async def test_each_held_request_is_counted_in_its_class_period(store: QueueStore, k: AeKeys) -> None:
    await held(store, k, {"ONLINE": 3, "BATCH": 2})
    # BATCH's first period ends at its insert: its requests are in their second.
    figures = await store.delays.figures(k, [("ONLINE", ""), ("BATCH", "0")])
    assert (figures.servers, figures.worker_tasks, figures.held) == (1, 5, 5)
    assert figures.held_by_period == {("ONLINE", 1): 3, ("BATCH", 2): 2}


async def test_beyond_the_sample_a_random_sample_is_counted_and_scaled(store: QueueStore, k: AeKeys) -> None:
    online, batch = 503, 497
    held_in_all = online + batch
    await held(store, k, {"ONLINE": online, "BATCH": batch})
    # The counts a sample of HELD_SAMPLE can give: a read of every held request (503 of ONLINE) is not among them.
    scaled = {math.floor(n * held_in_all / HELD_SAMPLE + 0.5) for n in range(HELD_SAMPLE + 1)}
    assert online not in scaled

    figures = await store.delays.figures(k, [("ONLINE", ""), ("BATCH", "")])
    counted = figures.held_by_period
    assert figures.held == held_in_all and set(counted) == {("ONLINE", 1), ("BATCH", 1)}
    assert counted[("ONLINE", 1)] in scaled and counted[("BATCH", 1)] in scaled
    assert abs(counted[("ONLINE", 1)] + counted[("BATCH", 1)] - held_in_all) <= 1  # rounding
    # Sampled without replacement: six standard errors off would fail once in hundreds of millions of runs.
    error = held_in_all * math.sqrt(0.25 / HELD_SAMPLE * (held_in_all - HELD_SAMPLE) / (held_in_all - 1))
    assert abs(counted[("ONLINE", 1)] - online) < 6 * error
