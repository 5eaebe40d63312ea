"""What every work service needs of a call: the caller's connection by its connect token, and JSON values as bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.roles import PrincipalInfo
from app.connections.service import ConnectionCache, ConnInfo, active_connection
from app.errors import ValidationFailed
from app.queues.store import QueueStore


@dataclass(frozen=True, slots=True)
class CallerConnections:
    """The callers' active connections, over this process's connection cache."""

    sessions: async_sessionmaker[AsyncSession]
    store: QueueStore
    cache: ConnectionCache

    async def of(self, principal: PrincipalInfo, token: str, role: str) -> ConnInfo:
        return await active_connection(self.sessions, self.store, self.cache, principal, token, role)


def json_bytes(value: Any, path: str) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:  # e.g. an integer beyond 64 bits, which JSON parsers disagree on
        raise ValidationFailed([{"path": path, "message": f"not storable as JSON: {exc}"}]) from exc
