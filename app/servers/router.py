from __future__ import annotations

from fastapi import APIRouter

from app.deps import AnyPrincipal, Operator, SessionDep, StateDep, Viewer, check_operator
from app.servers import service
from app.servers.performance import service_class_performance
from app.servers.schemas import ScalingOut, ServerInstancesOut, ServerLimitsIn, ServerLimitsOut, ServiceClassPerformance

router = APIRouter(prefix="/v1", tags=["goals and servers"])


@router.get(
    "/service-classes/{name}/performance",
    response_model=ServiceClassPerformance,
    summary="How a service class does against its goal: PI and response times per environment, node and period",
)
async def performance(name: str, state: StateDep, _: Viewer) -> ServiceClassPerformance:
    return await service_class_performance(state.queues, await state.policies.active(), name)


@router.get(
    "/connections/{token}/server-instances",
    response_model=ServerInstancesOut,
    summary="IWMSINF: how many more server instances this server's environment should have started",
)
async def server_instances(token: str, state: StateDep, principal: AnyPrincipal) -> ServerInstancesOut:
    server = await service.calling_server(state.sessions, state.queues, state.connection_cache, principal, token)
    assert server.node and server.application_environment
    return await service.server_instances(state.queues, server.node, server.application_environment)


@router.get(
    "/scaling/application-environments/{name}",
    response_model=ScalingOut,
    summary="Desired servers of an environment, for an external autoscaler (KEDA metrics-api scaler)",
)
async def scaling(name: str, state: StateDep, _: Viewer) -> ScalingOut:
    return await service.scaling(state.queues, await state.policies.active(), name)


@router.put(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="IWM4SLI: set an environment's server limits (a connected server of it, with its connect token, or an operator)",
)
async def set_server_limits(
    name: str, body: ServerLimitsIn, session: SessionDep, state: StateDep, principal: AnyPrincipal
) -> ServerLimitsOut:
    policy = await state.policies.knowing(name.upper())
    if body.connect_token is None:
        check_operator(principal)
        server = None
    else:
        server = await service.calling_server(state.sessions, state.queues, state.connection_cache, principal, body.connect_token)
    return await service.set_server_limits(session, state.queues, policy, principal, server, name, body)


@router.get(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="The server limits an environment runs under: the policy's, or those set by IWM4SLI",
)
async def server_limits(name: str, state: StateDep, _: Viewer) -> ServerLimitsOut:
    return await service.server_limits(state.queues, await state.policies.active(), name)


@router.delete(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="Reset an environment's server limits to the policy's",
)
async def reset_server_limits(name: str, session: SessionDep, state: StateDep, operator: Operator) -> ServerLimitsOut:
    return await service.reset_server_limits(session, state.queues, await state.policies.active(), operator, name)
