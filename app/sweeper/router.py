from __future__ import annotations

from fastapi import APIRouter

from app.deps import StateDep, Viewer
from app.sweeper.schemas import SweeperOut
from app.sweeper.service import swept_queues

router = APIRouter(prefix="/v1", tags=["sweeper"])


@router.get("/sweeper", response_model=SweeperOut, summary="The slow queue sweeper's settings and the queues it has swept")
async def sweeper(state: StateDep, _: Viewer) -> SweeperOut:
    settings = state.settings
    return SweeperOut(
        enabled=settings.sweeper_enabled,
        interval_s=settings.sweeper_interval_seconds,
        blob_requests=settings.sweeper_blob_requests,
        min_in_memory=settings.sweeper_min_in_memory,
        queues=await swept_queues(state.queues, await state.policies.current()),
    )
