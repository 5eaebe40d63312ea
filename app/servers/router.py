from __future__ import annotations

from fastapi import APIRouter

from app.deps import StateDep, Viewer
from app.servers import service
from app.servers.schemas import ServiceClassPerformance

router = APIRouter(prefix="/v1", tags=["goals and servers"])


@router.get(
    "/service-classes/{name}/performance",
    response_model=ServiceClassPerformance,
    summary="How a service class does against its goal: PI and response times per environment, node and period",
)
async def performance(name: str, state: StateDep, _: Viewer) -> ServiceClassPerformance:
    return await service.service_class_performance(state.queues, await state.policies.active(), name)
