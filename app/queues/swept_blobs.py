"""What the queues need of the database side of swept queues (after TPF MQSeries': docs/sources.md): app/sweeper/blobs.py implements it, and
the process's wiring (app/main.py) gives it to the queue store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.queues.keys import AeKeys


@dataclass(frozen=True, slots=True)
class SweptEntry:
    """A request as the queue scripts keep it: its id, metadata (JSON text) and payload (JSON text)."""

    id: str
    meta: str
    payload: str


class SweptBlobStore(Protocol):
    """Blobs of consecutive requests of one queue, and where each swept request is."""

    async def read(self, blob_id: int) -> list[SweptEntry] | None:
        """A blob's requests in queue order; None when it is gone."""

    async def forget(self, blob_ids: list[int]) -> None:
        """Blobs brought back or never chained, with their index rows."""

    async def locate(self, k: AeKeys, request_id: str) -> tuple[int, str] | None:
        """The blob holding a swept request, and its queue."""

    async def entry(self, k: AeKeys, request_id: str) -> SweptEntry | None:
        """A swept request as its blob keeps it, in one read by the index; None when it is in no blob."""

    async def of_queue_manager(self, k: AeKeys, queue_manager: int) -> dict[int, set[str]]:
        """A queue manager's swept requests here, by blob."""
