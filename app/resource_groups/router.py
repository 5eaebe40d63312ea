from __future__ import annotations

from fastapi import APIRouter

from app.deps import StateDep, Viewer
from app.resource_groups import service
from app.resource_groups.schemas import ResourceGroupList

router = APIRouter(prefix="/v1/resource-groups", tags=["resource-groups"])


@router.get("", response_model=ResourceGroupList, summary="Resource groups: their caps, requests in flight and time on the cap")
async def list_resource_groups(state: StateDep, _: Viewer) -> ResourceGroupList:
    return ResourceGroupList(items=await service.resource_groups(state.queues, state.policies))
