"""What the queue store keeps beside the queues, on a real Redis: the manager's published decisions and the
environments' snapshots."""

from __future__ import annotations

import json

from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request


async def test_a_decision_replaces_the_previous_one_whole(store: QueueStore, k: AeKeys) -> None:
    assert await store.results.desired_servers(k) == (0, {})
    await store.results.publish_decision(k, {SERVER: "ONLINE", SERVER + 1: "BATCH"}, [SERVER + 2], {"ONLINE": 2, "BATCH": 1})
    assert await store.results.desired_servers(k) == (3, {"ONLINE": 2, "BATCH": 1})
    assert await store.results.server_homes(k) == {str(SERVER): "ONLINE", str(SERVER + 1): "BATCH"}
    assert await store.redis.smembers(k.retire) == {str(SERVER + 2)}
    await store.results.publish_decision(k, {}, [], {"ONLINE": 0})
    assert await store.results.desired_servers(k) == (0, {"ONLINE": 0})
    assert await store.results.server_homes(k) == {} and await store.redis.smembers(k.retire) == set()


async def test_an_evaluation_replaces_the_previous_one_whole(store: QueueStore, k: AeKeys) -> None:
    await store.results.publish_performance(k, {"ONLINE:1": '{"pi": 1}', "ONLINE:2": '{"pi": 2}'})
    await store.results.publish_performance(k, {"ONLINE:1": '{"pi": 0.5}'})
    assert await store.results.performance(k) == ['{"pi": 0.5}']
    await store.results.publish_performance(k, {})
    assert await store.results.performance(k) == []


async def test_snapshots_and_activity_read_each_environment_on_each_node(store: QueueStore, k: AeKeys) -> None:
    other = store.keys("REMOTE", "PAYROLL")
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    await store.register_server(k, SERVER + 1, worker_tasks=1, worker_weight=1, overflow=True)
    await store.insert(k, QUEUE_MANAGER, [request(), request(), request("BATCH")], CONFIG.backlog_limit)
    await store.select(k, CONFIG, SERVER, 1, begin=True)
    await store.environments.set_server_limits("PAYROLL", '{"max": 3}')
    await store.environments.note_start_error(other, {"at": 1, "message": "no such command"}, keep_s=60)
    now, _ = await store.environments.record_termination(other, "launched-1", window_ms=60_000)

    (here, there), limits = await store.environments.snapshots([k, other], ["PAYROLL", "BILLING"])
    assert (here.servers, here.in_flight, here.depths, here.start_error) == (2, 1, {"ONLINE": 1, "BATCH": 1}, None)
    assert (there.servers, there.in_flight, there.depths, there.performance) == (0, 0, {}, [])
    assert there.start_error is not None and json.loads(there.start_error)["message"] == "no such command"
    assert limits == ['{"max": 3}', None]
    assert await store.environments.snapshots([], []) == ([], [])

    assert await store.environments.registered_servers(k) == {
        SERVER: {"tasks": 2, "weight": 1, "overflow": False},
        SERVER + 1: {"tasks": 1, "weight": 1, "overflow": True},
    }
    assert await store.environments.queue_depths(k) == {"ONLINE": 1, "BATCH": 1}
    since = int(now * 1000)
    assert await store.environments.activity([k, other], since) == [(2, 0), (0, 1)]
    assert await store.environments.activity([k, other], since + 1) == [(2, 0), (0, 0)]
