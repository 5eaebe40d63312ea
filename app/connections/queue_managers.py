"""Queue manager connections as the policy reads them (app.policy.service.QueueManagers): the policy is a layer below
the connections, so the app hands it this rather than the policy importing the connections."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.roles import PrincipalInfo
from app.connections.models import Connection
from app.connections.service import by_token
from app.errors import Conflict
from app.policy.models import DynamicApplicationEnvironment
from app.policy.service import QueueManagerRef


class ConnectedQueueManagers:
    async def connected(self, session: AsyncSession, principal: PrincipalInfo, token: str) -> QueueManagerRef:
        connection = await by_token(session, principal, token)
        if connection.role != "queue_manager" or connection.state != "active":
            raise Conflict("only a connected queue manager defines dynamic application environments", code="not_a_queue_manager")
        return QueueManagerRef(connection.id, connection.subsystem_type, connection.subsystem_name)

    async def dynamic_environments(self, session: AsyncSession) -> list[tuple[DynamicApplicationEnvironment, QueueManagerRef]]:
        rows = await session.execute(
            select(DynamicApplicationEnvironment, Connection.subsystem_type, Connection.subsystem_name).join(
                Connection, Connection.id == DynamicApplicationEnvironment.queue_manager_id
            )
        )
        return [(row, QueueManagerRef(row.queue_manager_id, sstype, ssname)) for row, sstype, ssname in rows]
