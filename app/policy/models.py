from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String, Text
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
