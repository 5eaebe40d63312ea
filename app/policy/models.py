from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class PolicyVersion(Base):
    """One installed service definition. Versions are never changed; the highest one is the active policy,
    so installing is one INSERT and activation is atomic."""

    __tablename__ = "policy_versions"

    version: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(32))
    digest: Mapped[str] = mapped_column(String(64))
    definition: Mapped[dict[str, Any]]
    source: Mapped[str] = mapped_column(Text)  # the document as the admin sent it
    installed_by: Mapped[str] = mapped_column(String(64))
    installed_at: Mapped[datetime] = mapped_column(default=utcnow)


class DynamicApplicationEnvironment(Base):
    """An application environment a queue manager defined for itself (IWM4AEDF): in scope only for that queue
    manager, removed when it disconnects. `definition` has the fields of a policy's environment."""

    __tablename__ = "dynamic_application_environments"
    __table_args__ = (CheckConstraint("name = upper(name)", name="name_upper_case"),)

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    queue_manager_id: Mapped[int] = mapped_column(ForeignKey("connections.id", ondelete="CASCADE"), index=True)
    definition: Mapped[dict[str, Any]]
    defined_at: Mapped[datetime] = mapped_column(default=utcnow)
