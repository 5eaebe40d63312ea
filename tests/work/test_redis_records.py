"""The work services' Redis records on a real Redis: idempotency routes and enclaves."""

from __future__ import annotations

from app.queues.request_meta import Enclave
from app.redis.context import RedisContext
from app.work.enclave_records import EnclaveRecords
from app.work.idempotency_routes import IdempotencyRoutes

QUEUE_MANAGER = 1


async def test_an_idempotency_route_is_claimed_by_the_first_writer(redis_context: RedisContext) -> None:
    store = IdempotencyRoutes(redis_context, ttl_s=60)
    assert await store.routed_nodes(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"]) == [None, None]
    await store.claim(QUEUE_MANAGER, "PAYROLL", ["k1"], "NODE_A")
    await store.claim(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"], "NODE_B")  # a concurrent retry, later
    assert await store.routed_nodes(QUEUE_MANAGER, "PAYROLL", ["k1", "k2"]) == ["NODE_A", "NODE_B"]
    # Per queue manager and environment: the same key of another is another request.
    assert await store.routed_nodes(QUEUE_MANAGER + 1, "PAYROLL", ["k1"]) == [None]
    assert await store.routed_nodes(QUEUE_MANAGER, "BILLING", ["k1"]) == [None]
    assert 0 < await redis_context.redis.ttl(f"{redis_context.prefix}:idem-route:{{{QUEUE_MANAGER}:PAYROLL:k1}}") <= 60


async def test_an_enclave_expires_with_its_ttl_and_can_be_deleted(redis_context: RedisContext) -> None:
    store = EnclaveRecords(redis_context)
    enclave = Enclave({"sc": "ONLINE", "rc": "", "dep": False, "qm": QUEUE_MANAGER, "policy": 1})
    await store.save("e1", enclave, ttl_s=30)
    assert await store.get("e1") == enclave
    assert 0 < await redis_context.redis.ttl(f"{redis_context.prefix}:enc:{{e1}}") <= 30
    await store.delete("e1")
    assert await store.get("e1") is None
