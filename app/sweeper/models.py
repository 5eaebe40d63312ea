from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

# SQLite numbers rows only through an INTEGER primary key; PostgreSQL gets 64 bits.
BlobId = BigInteger().with_variant(Integer(), "sqlite")


class SweptBlob(Base):
    """Consecutive requests of one queue moved out of Redis: JSON [[id, meta, payload], ...] in queue order. The
    queue's order of blobs (its chain) is kept in Redis with the queue; a blob that is in no chain is a leftover
    of an aborted or interrupted sweep."""

    __tablename__ = "swept_blobs"
    __table_args__ = (Index(None, "node", "application_environment", "queue"),)

    id: Mapped[int] = mapped_column(BlobId, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(32))
    application_environment: Mapped[str] = mapped_column(String(32))
    queue: Mapped[str] = mapped_column(String(64))  # service class and dependent/independent, as keys.queue_name
    requests: Mapped[int]
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SweptRequest(Base):
    """Where a swept request is, so that a delete or a purge finds it without bringing its blob back."""

    __tablename__ = "swept_requests"
    __table_args__ = (Index(None, "node", "application_environment", "queue_manager"),)

    node: Mapped[str] = mapped_column(String(32), primary_key=True)
    application_environment: Mapped[str] = mapped_column(String(32), primary_key=True)
    request_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    queue_manager: Mapped[int]
    blob_id: Mapped[int] = mapped_column(BlobId, ForeignKey("swept_blobs.id", ondelete="CASCADE"), index=True)
