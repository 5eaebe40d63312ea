from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AuditEventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


class AuditEventList(BaseModel):
    items: list[AuditEventOut]
    total: int
    limit: int
    offset: int
