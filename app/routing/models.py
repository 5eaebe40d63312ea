from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

# The row of a node itself has no environment.
NODE_ITSELF = ""


class RoutingOverride(Base):
    """What an operator changed at run time of a node's routing attributes (`application_environment` empty) or of an
    environment's instance on a node: only the attributes named, over the policy's; a new policy keeps them."""

    __tablename__ = "routing_overrides"
    __table_args__ = (CheckConstraint("node = upper(node)", name="node_upper_case"),)

    node: Mapped[str] = mapped_column(String(32), primary_key=True)
    application_environment: Mapped[str] = mapped_column(String(32), primary_key=True)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON)
    changed_at: Mapped[datetime] = mapped_column(default=utcnow)
    changed_by: Mapped[str] = mapped_column(String(64))
