"""A queue store on the session's real Redis, each test under its own key prefix, with swept blobs kept in memory
(the store needs only app.queues.swept_blobs.SweptBlobStore of them)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.queues.base import AeConfig
from app.queues.keys import AeKeys
from app.queues.request_meta import RequestMeta
from app.queues.request_status import EndedStatus
from app.queues.store import QueueStore
from app.queues.swept_blobs import SweptEntry
from app.queues.transitions import NewRequest
from app.redis.topology import close_redis, is_cluster, open_redis

CONFIG = AeConfig(class_order=("ONLINE", "BATCH"), completion_time_ms=30_000, backlog_limit=5, max_deliveries=2)
TOMBSTONE_MS = 60_000
SERVER, OTHER_SERVER = 7, 8
QUEUE_MANAGER, OTHER_QUEUE_MANAGER = 1, 2


class MemoryBlobs:
    """Swept blobs in this process's memory, as app/sweeper/blobs.py keeps them in the database."""

    def __init__(self) -> None:
        self.blobs: dict[int, tuple[AeKeys, str, list[SweptEntry]]] = {}
        self.written = 0

    async def write(self, k: AeKeys, queue: str, entries: list[SweptEntry]) -> int:
        self.written += 1
        blob_id = self.written  # as the database numbers them: never an id given before
        self.blobs[blob_id] = (k, queue, list(entries))
        return blob_id

    async def read(self, blob_id: int) -> list[SweptEntry] | None:
        blob = self.blobs.get(blob_id)
        return list(blob[2]) if blob else None

    async def forget(self, blob_ids: list[int]) -> None:
        for blob_id in blob_ids:
            self.blobs.pop(blob_id, None)

    async def locate(self, k: AeKeys, request_id: str) -> tuple[int, str] | None:
        for blob_id, (keys, queue, entries) in self.blobs.items():
            if keys == k and any(e.id == request_id for e in entries):
                return blob_id, queue
        return None

    async def entry(self, k: AeKeys, request_id: str) -> SweptEntry | None:
        located = await self.locate(k, request_id)
        return next(e for e in self.blobs[located[0]][2] if e.id == request_id) if located else None

    async def of_queue_manager(self, k: AeKeys, queue_manager: int) -> dict[int, set[str]]:
        return {
            blob_id: ids
            for blob_id, (keys, _, entries) in self.blobs.items()
            if keys == k and (ids := {e.id for e in entries if json.loads(e.meta)["qm"] == queue_manager})
        }


@pytest.fixture
def blobs() -> MemoryBlobs:
    return MemoryBlobs()


@pytest.fixture
async def store(redis_url: str, blobs: MemoryBlobs) -> AsyncIterator[QueueStore]:
    redis = await open_redis(redis_url, await is_cluster(redis_url), max_connections=50)
    prefix = f"q{uuid.uuid4().hex[:10]}"
    store = QueueStore(redis, prefix, idempotency_ttl_s=60, tombstone_ms=TOMBSTONE_MS, samples_ms=60_000, blobs=blobs)
    yield store
    await store.aclose()
    await close_redis(redis)


@pytest.fixture
def k(store: QueueStore) -> AeKeys:
    return store.keys("LOCAL", "PAYROLL")


def request(
    service_class: str = "ONLINE", *, queue_manager: int = QUEUE_MANAGER, dependent: bool = False, idempotency_key: str | None = None
) -> NewRequest:
    meta: dict[str, Any] = {"sc": service_class, "dep": dependent, "qm": queue_manager, "state": "q", "deliveries": 0, "exit": ""}
    return NewRequest(uuid.uuid4().hex, service_class, dependent, RequestMeta(meta), '{"n": 1}', idempotency_key)


async def tombstone_of(store: QueueStore, k: AeKeys, request_id: str) -> str | None:
    """An ended request's tombstone as its status reads it, `<outcome>|<queue manager>`; None while it has none."""
    status = await store.statuses.get(k, [], request_id)
    if not isinstance(status, EndedStatus):
        return None
    return f"{status.outcome}|{'' if status.queue_manager is None else status.queue_manager}"


async def meta_of(store: QueueStore, k: AeKeys, request_id: str) -> dict[str, Any] | None:
    raw = await store.redis.hget(k.req, request_id)
    return json.loads(raw) if raw else None
