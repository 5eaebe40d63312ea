"""A replica whose clock is off changes nothing in the work records: each request's instants are Redis's. Here the
insert comes through a process whose clock runs 5 s ahead and the select through one 5 s behind (one app, its
clock moved between calls: what two replicas on hosts with skewed clocks do)."""

from __future__ import annotations

import time

from app.servers.performance import evaluate_environment
from app.work import records
from tests.waiting import eventually


async def test_skewed_replicas_make_no_negative_duration(world, app, monkeypatch):
    real = time.time
    server = await world.server(tasks=5)
    monkeypatch.setattr(time, "time", lambda: real() + 5)
    tokens = [(await world.insert({"n": n}))["token"] for n in range(5)]
    monkeypatch.setattr(time, "time", lambda: real() - 5)
    items = (await world.select(server, max_items=5, begin=True)).json()["items"]
    assert sorted(item["token"] for item in items) == sorted(tokens)
    monkeypatch.setattr(time, "time", lambda: real() + 5)
    ended = (await world.select(server, end=[{"token": token} for token in tokens])).json()["ended"]
    assert all(e["response_time_ms"] >= 0 for e in ended)

    state = app.state.wlm
    state_records = await eventually(lambda: (t := records.read(state.settings.records_dir)).num_rows == 5 and t, timeout=20)
    for row in state_records.to_pylist():
        assert row["queue_time_ms"] >= 0 and row["execution_time_ms"] >= 0
        assert row["response_time_ms"] == row["queue_time_ms"] + row["execution_time_ms"]

    monkeypatch.setattr(time, "time", real)
    policy = await state.policies.active()
    judged = {
        (p.service_class, p.period): p for p in await evaluate_environment(state.queues, policy, state.queues.keys("LOCAL", "PAYROLL"), 60)
    }
    assert judged[("ONLINE", 1)].ended == 5 and judged[("ONLINE", 1)].performance_index is not None
