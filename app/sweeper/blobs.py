"""The database side of swept queues: blobs of consecutive requests, and where each swept request is."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import cast

import orjson
from sqlalchemy import Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.queues.keys import AeKeys
from app.queues.request_meta import RequestMeta
from app.queues.swept_blobs import SweptEntry
from app.sweeper.models import SweptBlob, SweptRequest

# Written with Core inserts; declarative types a mapped class's __table__ as any FromClause, this one is a Table.
_SWEPT_REQUESTS = cast(Table, SweptRequest.__table__)


class SweptBlobs:
    """The store of swept blobs the queues are given (app.queues.swept_blobs.SweptBlobStore), and the sweeper's
    writes and clean-up."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def write(self, k: AeKeys, queue: str, entries: list[SweptEntry], blob_requests: int) -> list[int]:
        """Blobs of at most `blob_requests` holding `entries` in order, with an index row per request, in one
        transaction; returns the blobs' ids in order."""
        blob_ids = []
        async with self.sessions() as session, session.begin():
            for first in range(0, len(entries), blob_requests):
                part = entries[first : first + blob_requests]
                data = orjson.dumps([[e.id, e.meta, e.payload] for e in part])
                blob = SweptBlob(node=k.node, application_environment=k.ae, queue=queue, requests=len(part), data=data)
                session.add(blob)
                await session.flush()
                rows = [
                    {
                        "node": k.node,
                        "application_environment": k.ae,
                        "request_id": e.id,
                        "queue_manager": RequestMeta.from_json(e.meta).queue_manager,
                        "blob_id": blob.id,
                    }
                    for e in part
                ]
                await session.execute(insert(_SWEPT_REQUESTS), rows)  # Core, not ORM: a thousand rows in one statement
                blob_ids.append(blob.id)
        return blob_ids

    async def read(self, blob_id: int) -> list[SweptEntry] | None:
        async with self.sessions() as session:
            data = await session.scalar(select(SweptBlob.data).where(SweptBlob.id == blob_id))
        if data is None:
            return None
        return [SweptEntry(*entry) for entry in orjson.loads(data)]

    async def forget(self, blob_ids: list[int]) -> None:
        """Blobs brought back or never chained, with their index rows."""
        if not blob_ids:
            return
        async with self.sessions() as session, session.begin():
            await session.execute(delete(SweptRequest).where(SweptRequest.blob_id.in_(blob_ids)))
            await session.execute(delete(SweptBlob).where(SweptBlob.id.in_(blob_ids)))

    async def locate(self, k: AeKeys, request_id: str) -> tuple[int, str] | None:
        """The blob holding a swept request, and its queue."""
        query = (
            select(SweptRequest.blob_id, SweptBlob.queue)
            .join(SweptBlob, SweptBlob.id == SweptRequest.blob_id)
            .where(SweptRequest.node == k.node, SweptRequest.application_environment == k.ae, SweptRequest.request_id == request_id)
        )
        async with self.sessions() as session:
            row = (await session.execute(query)).first()
        return (row[0], row[1]) if row else None

    async def entry(self, k: AeKeys, request_id: str) -> SweptEntry | None:
        """A swept request as its blob keeps it, in one read by the index; None when it is in no blob."""
        query = (
            select(SweptBlob.data)
            .join(SweptRequest, SweptRequest.blob_id == SweptBlob.id)
            .where(SweptRequest.node == k.node, SweptRequest.application_environment == k.ae, SweptRequest.request_id == request_id)
        )
        async with self.sessions() as session:
            data = await session.scalar(query)
        if data is None:
            return None
        return next((SweptEntry(*entry) for entry in orjson.loads(data) if entry[0] == request_id), None)

    async def of_queue_manager(self, k: AeKeys, queue_manager: int) -> dict[int, set[str]]:
        """A queue manager's swept requests here, by blob."""
        query = select(SweptRequest.blob_id, SweptRequest.request_id).where(
            SweptRequest.node == k.node, SweptRequest.application_environment == k.ae, SweptRequest.queue_manager == queue_manager
        )
        result: dict[int, set[str]] = defaultdict(set)
        async with self.sessions() as session:
            for blob_id, request_id in await session.execute(query):
                result[blob_id].add(request_id)
        return result

    async def written_before(self, k: AeKeys, cutoff: datetime) -> list[tuple[int, str]]:
        """(blob id, queue) of the environment's blobs written before `cutoff`."""
        query = select(SweptBlob.id, SweptBlob.queue).where(
            SweptBlob.node == k.node, SweptBlob.application_environment == k.ae, SweptBlob.created_at < cutoff
        )
        async with self.sessions() as session:
            return [(blob_id, queue) for blob_id, queue in await session.execute(query)]
