from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base, utcnow


class Principal(Base):
    __tablename__ = "principals"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(256), default="")
    roles: Mapped[list[str]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(64))

    permits: Mapped[list[ServerPermit]] = relationship(
        back_populates="principal", cascade="all, delete-orphan", lazy="selectin", order_by="ServerPermit.id"
    )


class ServerPermit(Base):
    """Permission to connect servers for resources matching `profile` (sstype.subsys.applenv[.node], generic)."""

    __tablename__ = "server_permits"
    __table_args__ = (UniqueConstraint("principal_id", "profile"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"))
    profile: Mapped[str] = mapped_column(String(255))

    principal: Mapped[Principal] = relationship(back_populates="permits")


class ApiKey(Base):
    __tablename__ = "api_keys"

    # Public identifier, for listing and revoking; the key itself is only stored as a SHA-256 hash.
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(256), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    principal: Mapped[Principal] = relationship(lazy="joined")
