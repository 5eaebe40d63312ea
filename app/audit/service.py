from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.models import AuditEvent


def record(session: AsyncSession, actor: str, action: str, target: str, **detail: Any) -> AuditEvent:
    """Adds an audit event to the caller's transaction, so it commits or rolls back with the change it records."""
    event = AuditEvent(actor=actor, action=action, target=target, detail=detail)
    session.add(event)
    return event


async def list_events(session: AsyncSession, *, action: str | None, limit: int, offset: int) -> tuple[list[AuditEvent], int]:
    query = select(AuditEvent)
    if action:
        query = query.where(AuditEvent.action == action)
    total = await session.scalar(select(func.count()).select_from(query.subquery()))
    rows = await session.scalars(query.order_by(AuditEvent.id.desc()).limit(limit).offset(offset))
    return list(rows), total or 0
