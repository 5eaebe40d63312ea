"""What the queue store keeps beside the queues, on a real Redis: connection records and departed queue managers,
idempotency routes, enclaves, the manager's published decisions and the environments' snapshots."""

from __future__ import annotations

import json

from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request

QM_RECORD = {"id": QUEUE_MANAGER, "role": "queue_manager", "node": None}


async def test_a_departed_queue_manager_is_due_only_once_its_time_has_come(store: QueueStore) -> None:
    await store.note_departed(QM_RECORD, purge_again_after_ms=60_000)
    assert await store.departed_due() == []
    await store.note_departed({**QM_RECORD, "id": 2}, purge_again_after_ms=0)
    (due,) = await store.departed_due()
    assert due.record == {**QM_RECORD, "id": 2}
    await store.forget_departed(due)
    assert await store.departed_due() == []
    assert await store.redis.zcard(f"{store.prefix}:departed") == 1  # the other one still waits for its time


async def test_a_connection_record_reads_back_until_forgotten(store: QueueStore) -> None:
    assert await store.connection("abc") is None
    await store.save_connection("abc", QM_RECORD)
    assert await store.connection("abc") == QM_RECORD
    await store.forget_connection("abc")
    assert await store.connection("abc") is None


async def test_an_idempotency_route_is_claimed_by_the_first_writer(store: QueueStore) -> None:
    assert await store.routed_nodes(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"]) == [None, None]
    await store.claim_routes(QUEUE_MANAGER, "PAYROLL", ["k1"], "NODE_A")
    await store.claim_routes(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"], "NODE_B")  # a concurrent retry, later
    assert await store.routed_nodes(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"]) == ["NODE_A", "NODE_B"]
    # Per queue manager and environment: the same key of another is another request.
    assert await store.routed_nodes(QUEUE_MANAGER + 1, "PAYROLL", ["k1"]) == [None]
    assert await store.routed_nodes(QUEUE_MANAGER, "BILLING", ["k1"]) == [None]
    assert 0 < await store.redis.ttl(f"{store.prefix}:idem-route:{{{QUEUE_MANAGER}:PAYROLL:k1}}") <= store.idempotency_ttl_s


async def test_an_enclave_expires_with_its_ttl_and_can_be_deleted(store: QueueStore) -> None:
    enclave = {"sc": "ONLINE", "rc": "", "dep": False, "qm": QUEUE_MANAGER, "policy": 1}
    await store.save_enclave("e1", enclave, ttl_s=30)
    assert await store.enclave("e1") == enclave
    assert 0 < await store.redis.ttl(f"{store.prefix}:enc:{{e1}}") <= 30
    await store.delete_enclave("e1")
    assert await store.enclave("e1") is None


async def test_a_decision_replaces_the_previous_one_whole(store: QueueStore, k: AeKeys) -> None:
    assert await store.desired_servers(k) == (0, {})
    await store.publish_decision(k, {SERVER: "ONLINE", SERVER + 1: "BATCH"}, [SERVER + 2], {"ONLINE": 2, "BATCH": 1})
    assert await store.desired_servers(k) == (3, {"ONLINE": 2, "BATCH": 1})
    assert await store.server_homes(k) == {str(SERVER): "ONLINE", str(SERVER + 1): "BATCH"}
    assert await store.redis.smembers(k.retire) == {str(SERVER + 2)}
    await store.publish_decision(k, {}, [], {"ONLINE": 0})
    assert await store.desired_servers(k) == (0, {"ONLINE": 0})
    assert await store.server_homes(k) == {} and await store.redis.smembers(k.retire) == set()


async def test_an_evaluation_replaces_the_previous_one_whole(store: QueueStore, k: AeKeys) -> None:
    await store.publish_performance(k, {"ONLINE:1": '{"pi": 1}', "ONLINE:2": '{"pi": 2}'})
    await store.publish_performance(k, {"ONLINE:1": '{"pi": 0.5}'})
    assert await store.performance(k) == ['{"pi": 0.5}']
    await store.publish_performance(k, {})
    assert await store.performance(k) == []


async def test_snapshots_and_activity_read_each_environment_on_each_node(store: QueueStore, k: AeKeys) -> None:
    other = store.keys("REMOTE", "PAYROLL")
    await store.register_server(k, SERVER, worker_tasks=2, worker_weight=1, overflow=False)
    await store.register_server(k, SERVER + 1, worker_tasks=1, worker_weight=1, overflow=True)
    await store.insert(k, QUEUE_MANAGER, [request(), request(), request("BATCH")], CONFIG.backlog_limit)
    await store.select(k, CONFIG, SERVER, 1, begin=True)
    await store.set_server_limits("PAYROLL", '{"max": 3}')
    await store.note_start_error(other, {"at": 1, "message": "no such command"}, keep_s=60)
    now, _ = await store.record_termination(other, "launched-1", window_ms=60_000)

    (here, there), limits = await store.snapshots([k, other], ["PAYROLL", "BILLING"])
    assert (here.servers, here.in_flight, here.depths, here.start_error) == (2, 1, {"ONLINE": 1, "BATCH": 1}, None)
    assert (there.servers, there.in_flight, there.depths, there.performance) == (0, 0, {}, [])
    assert there.start_error is not None and json.loads(there.start_error)["message"] == "no such command"
    assert limits == ['{"max": 3}', None]
    assert await store.snapshots([], []) == ([], [])

    assert await store.registered_servers(k) == {
        SERVER: {"tasks": 2, "weight": 1, "overflow": False},
        SERVER + 1: {"tasks": 1, "weight": 1, "overflow": True},
    }
    assert await store.queue_depths(k) == {"ONLINE": 1, "BATCH": 1}
    since = int(now * 1000)
    assert await store.activity([k, other], since) == [(2, 0), (0, 1)]
    assert await store.activity([k, other], since + 1) == [(2, 0), (0, 0)]
