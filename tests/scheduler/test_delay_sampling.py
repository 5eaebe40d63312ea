"""Delay samples on the real app, Redis and databases (app/scheduler/duties/delay_sampling.py): each of the seven
delay causes built as a request's own status test builds it, and the samples name it; its share shown in the class's
performance and counted on /metrics; a failover's gap missing from the samples, not counted as zero delay."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings
from app.scheduler.duties.context import DutyContext
from app.scheduler.duties.delay_sampling import DelaySampling
from app.servers import delay_records
from app.servers.delay_samples import shares
from app.servers.delays import STATES
from app.servers.performance import evaluate_environment
from app.state import AppState
from tests.conftest import ADMIN
from tests.waiting import eventually
from tests.work.conftest import BATCH, World, grouped_policy, make_world


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The manager's decisions are the tests' own: its loop judges goals once, at the start, before any work."""
    return settings.model_copy(update={"goal_interval_seconds": 3600.0})


@pytest.fixture
async def world(client: httpx.AsyncClient) -> World:
    return await make_world(client)


def wlm(app: FastAPI) -> AppState:
    return app.state.wlm  # type: ignore[no-any-return]


def sampler(app: FastAPI, owner: str = "test-sampler", epoch: int = 1) -> DelaySampling:
    """A scheduler's delay sampling of its own, beside the app's (whose counts stay its own)."""
    return DelaySampling(DutyContext(wlm(app), epoch, owner))


async def sampled(app: FastAPI, service_class: str = "ONLINE", ticks: int = 1) -> dict[str, int]:
    """Per state, the requests of PAYROLL's class queue (period 1) counted by `ticks` samples of a new sampling (read
    over its window, which a minute's end does not empty)."""
    state, sampling = wlm(app), sampler(app)
    for _ in range(ticks):
        await sampling.sample_delays()
    counts = sampling.book.window("PAYROLL", "LOCAL", await state.queues.clock_ms())[(service_class, 1)]
    assert counts[0] == ticks
    return {name: count for name, count in zip(STATES, counts[1:], strict=True) if count}


async def test_no_server_then_servers_starting_then_busy_with_equal_work_then_quiesced(world: World, app: FastAPI) -> None:
    await world.insert({"n": 1})
    assert await sampled(app, ticks=2) == {"no_server": 2}

    server = await world.server(tasks=2)
    state = wlm(app)
    keys = state.queues.keys("LOCAL", "PAYROLL")
    await world.select(server)  # takes the first; a task is free for the next
    await world.insert({"n": 2})
    assert await sampled(app) == {"using": 1, "unknown": 1}  # a task is free: about to be selected
    await state.queues.results.publish_decision(keys, {}, [], {"ONLINE": 3})  # the manager wants more than the one connected
    assert await sampled(app) == {"using": 1, "servers_starting": 1}
    await state.queues.results.publish_decision(keys, {}, [], {"ONLINE": 1})

    await world.select(server)  # takes the second: both tasks hold ONLINE work
    await world.insert({"n": 3})
    await world.insert({"n": 4}, classification=BATCH)
    assert await sampled(app) == {"using": 2, "busy_higher": 1}
    assert await sampled(app, "BATCH") == {"busy_higher": 1}

    quiesce = await world.client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"})
    assert quiesce.status_code == 200, quiesce.text
    assert await sampled(app) == {"using": 2, "environment_state": 1}


async def test_busy_with_less_important_work_then_given_back(world: World, app: FastAPI) -> None:
    server = await world.server(tasks=1)
    batch = (await world.insert({"n": 1}, classification=BATCH))["token"]
    await world.select(server)
    await world.insert({"n": 2})
    assert await sampled(app) == {"busy_lower": 1}
    assert await sampled(app, "BATCH") == {"using": 1}

    state = wlm(app)
    await state.queues.redis.zadd(state.queues.keys("LOCAL", "PAYROLL").leases, {batch.rsplit("~", 1)[1]: 0})  # its time is up

    async def given_back() -> bool:
        return bool((await sampled(app, "BATCH")).get("redelivery"))

    await eventually(given_back, 10, what="the request given back")
    assert await sampled(app, "BATCH") == {"redelivery": 1}


async def test_a_class_whose_resource_group_is_at_its_cap(client: httpx.AsyncClient, app: FastAPI) -> None:
    world = await make_world(client, grouped_policy([{"name": "ONE", "max_in_flight": 1}], ONLINE="ONE"))
    server = await world.server(tasks=2)
    await world.insert({"n": 1})
    await world.select(server)
    await world.insert({"n": 2})
    assert await sampled(app) == {"using": 1, "group_cap": 1}


async def test_the_shares_in_the_performance_and_the_counts_on_metrics(world: World, app: FastAPI) -> None:
    await world.insert({"n": 1})
    await world.insert({"n": 2})
    state = wlm(app)
    sampling = sampler(app)
    for _ in range(3):
        await sampling.sample_delays()
    await evaluate_environment(state.queues, await state.policies.active(), state.queues.keys("LOCAL", "PAYROLL"), 60, sampling.book)
    (online,) = (await world.client.get("/v1/service-classes/ONLINE/performance", headers=ADMIN)).json()["periods"]
    assert (online["delay_samples"], online["using_pct"], online["delay_pct"]["no_server"]) == (3, 0.0, 100.0)
    assert sum(online["delay_pct"].values()) == 100.0 and len(online["delay_pct"]) == 7
    assert shares(None).delay_pct.keys() == online["delay_pct"].keys()

    await sampling.write(None)  # the minutes' rows, and the totals /metrics counts
    scraped = (await world.client.get("/metrics")).text
    label = 'application_environment="PAYROLL",service_class="ONLINE",period="1",cause="no_server"'
    (line,) = [line for line in scraped.splitlines() if line.startswith(f"wlm_delay_samples_total{{{label}}}")]
    assert int(line.rsplit(" ", 1)[1]) >= 6  # ours; the app's own scheduler may have added its minutes too


async def test_a_failover_s_gap_is_missing_samples_not_zero_delay(world: World, app: FastAPI) -> None:
    await world.insert({"n": 1})
    first, second = sampler(app, "scheduler-a", 1), sampler(app, "scheduler-b", 2)
    for _ in range(2):
        await first.sample_delays()
    await first.write_at_stop()  # deposed: what it counted is written; then no scheduler samples for a while
    for _ in range(3):
        await second.sample_delays()
    await second.write_at_stop()
    await second.write_at_stop()  # nothing left: nothing written twice

    rows = [
        r
        for r in delay_records.read(wlm(app).settings.delay_samples_dir).to_pylist()
        if r["scheduler"] in ("scheduler-a", "scheduler-b") and r["service_class"] == "ONLINE" and r["period"] == 1
    ]
    by_scheduler = {(s, e): (0, 0) for s, e in (("scheduler-a", 1), ("scheduler-b", 2))}
    for r in rows:
        samples, no_server = by_scheduler[(r["scheduler"], r["epoch"])]
        by_scheduler[(r["scheduler"], r["epoch"])] = (samples + r["samples"], no_server + r["no_server"])
        assert r["using"] == r["unknown"] == 0
    # The minute holds 5 samples where a scheduler sampling throughout would have taken 240: the gap is missing.
    assert by_scheduler == {("scheduler-a", 1): (2, 2), ("scheduler-b", 2): (3, 3)}
