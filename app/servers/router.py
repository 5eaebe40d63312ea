from __future__ import annotations

from fastapi import APIRouter

from app.deps import AnyPrincipal, StateDep, Viewer
from app.servers import service
from app.servers.performance import service_class_performance
from app.servers.schemas import ScalingOut, ServerInstancesOut, ServiceClassPerformance

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
