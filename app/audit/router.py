from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.audit import service
from app.audit.schemas import AuditEventList, AuditEventOut
from app.deps import Admin, Offset, SessionDep

router = APIRouter(prefix="/v1/audit", tags=["audit"])


@router.get("", response_model=AuditEventList, summary="Audit trail, newest first")
async def list_events(
    session: SessionDep,
    _: Admin,
    action: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> AuditEventList:
    rows, total = await service.list_events(session, action=action, limit=limit, offset=offset)
    return AuditEventList(items=[AuditEventOut.model_validate(r) for r in rows], total=total, limit=limit, offset=offset)
