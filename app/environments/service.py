"""The application environment's API over the domains that hold its parts: the operator's display of its state and
activity (D WLM,APPLENV=), the servers' limits (IWM4SLI), the routing of its instance on a node, and the policy's
dynamic definitions (IWM4AEDF). Each call goes to the owning domain; nothing is decided here."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.roles import PrincipalInfo
from app.connections.service import ConnectionCache
from app.environments.schemas import (
    ApplicationEnvironmentList,
    ApplicationEnvironmentOut,
    DynamicApplicationEnvironmentIn,
    DynamicApplicationEnvironmentOut,
    InstanceOut,
    ServerLimitsIn,
    ServerLimitsOut,
)
from app.operator import display as operator_display
from app.operator.commands import DisplayCommand
from app.operator.service import OperatorStore
from app.policy import service as policy_service
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore
from app.queues.store import QueueStore
from app.routing import service as routing_service
from app.routing.service import RoutingStore
from app.servers import service as servers_service

# ---------------------------------------------------------------------------------------------------------------------
# D WLM,APPLENV= (app/operator/display.py)
# ---------------------------------------------------------------------------------------------------------------------


async def display(
    queues: QueueStore, operator: OperatorStore, policy: ActivePolicy | None, pattern: str, *, dynamic: bool
) -> ApplicationEnvironmentList:
    """The environments whose names match `pattern` (`*` for any run of characters), the dynamic ones or the others."""
    return await operator_display.display(queues, operator, policy, DisplayCommand(pattern.upper(), dynamic=dynamic))


async def describe(queues: QueueStore, operator: OperatorStore, policy: ActivePolicy | None, name: str) -> ApplicationEnvironmentOut:
    return await operator_display.describe(queues, operator, policy, name)


# ---------------------------------------------------------------------------------------------------------------------
# IWM4AEDF: dynamic environments (app/policy/service.py)
# ---------------------------------------------------------------------------------------------------------------------


async def define_dynamic(
    session: AsyncSession,
    policies: PolicyStore,
    queue_manager: PrincipalInfo,
    body: DynamicApplicationEnvironmentIn,
    *,
    most_per_queue_manager: int,
    longest_completion_ms: int | None = None,
) -> tuple[DynamicApplicationEnvironmentOut, bool]:
    """The environment a connected queue manager defines, and whether it is new (a repeat is answered with the first)."""
    row, connection, created = await policy_service.define_dynamic(
        session, policies, queue_manager, body, most_per_queue_manager=most_per_queue_manager, longest_completion_ms=longest_completion_ms
    )
    defined = DynamicApplicationEnvironmentOut(
        **row.definition,
        subsystem_type=connection.subsystem_type,
        subsystem_name=connection.subsystem_name,
        queue_manager_id=connection.id,
        defined_at=row.defined_at,
    )
    return defined, created


# ---------------------------------------------------------------------------------------------------------------------
# IWM4SLI: server limits (app/servers/service.py)
# ---------------------------------------------------------------------------------------------------------------------


async def server_limits(queues: QueueStore, policy: ActivePolicy, name: str) -> ServerLimitsOut:
    return await servers_service.server_limits(queues, policy, name)


async def set_server_limits(
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    queues: QueueStore,
    connections: ConnectionCache,
    policy: ActivePolicy,
    principal: PrincipalInfo,
    name: str,
    body: ServerLimitsIn,
) -> ServerLimitsOut:
    """IWM4SLI by the connected server whose connect token `body` carries or, with none, by an operator (the caller
    checks the role)."""
    server = None
    if body.connect_token is not None:
        server = await servers_service.calling_server(sessions, queues, connections, principal, body.connect_token)
    return await servers_service.set_server_limits(session, queues, policy, principal, server, name, body)


async def reset_server_limits(
    session: AsyncSession, queues: QueueStore, policy: ActivePolicy, operator: PrincipalInfo, name: str
) -> ServerLimitsOut:
    return await servers_service.reset_server_limits(session, queues, policy, operator, name)


# ---------------------------------------------------------------------------------------------------------------------
# An instance's routing attributes (app/routing/service.py)
# ---------------------------------------------------------------------------------------------------------------------


async def alter_instance(
    session: AsyncSession, store: RoutingStore, policy: ActivePolicy, operator: PrincipalInfo, ae: str, node: str, changes: dict[str, Any]
) -> InstanceOut:
    """An operator's change of the environment's instance on `node`; a None takes an attribute back to the policy's."""
    overridden = await routing_service.alter(session, store, policy, operator.name, node, ae, changes)
    return InstanceOut(node=node, application_environment=ae, overridden=overridden)
