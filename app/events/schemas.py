from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class EventOut(BaseModel):
    """One advisory, as each SSE `data:` line carries it (the SSE `event:` is its subject, `id:` its stream id)."""

    id: str
    subject: str
    at: float
    data: dict[str, Any]
