from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from app.deps import StateDep, Viewer
from app.scheduler.schemas import MemberOut, SchedulerOut
from app.scheduler.service import scheduler_status

router = APIRouter(prefix="/v1", tags=["scheduler"])


def _moment(ms: str | None) -> datetime | None:
    return datetime.fromtimestamp(int(ms) / 1000, UTC) if ms else None


@router.get("/scheduler", response_model=SchedulerOut, summary="Who holds the scheduler's role, its epoch, and the members")
async def scheduler(state: StateDep, _: Viewer) -> SchedulerOut:
    settings = state.settings
    holder, members = await scheduler_status(state.queues.context)
    activation_ms = settings.scheduler_activation_seconds * 1000
    return SchedulerOut(
        holder=holder.get("member"),
        epoch=int(holder.get("epoch", 0)),
        weight=int(holder["weight"]) if "weight" in holder else None,
        since=_moment(holder.get("since")),
        renewed=_moment(holder.get("renewed")),
        this_process=state.scheduler.name if state.scheduler else None,
        activation_interval_s=settings.scheduler_activation_seconds,
        heartbeat_interval_s=settings.scheduler_heartbeat_seconds,
        members=[
            MemberOut(
                member=m.member,
                weight=m.weight,
                seen_ms_ago=m.seen_ms_ago,
                live=m.seen_ms_ago <= activation_ms,
                host=m.info.get("host"),
                pid=m.info.get("pid"),
            )
            for m in members
        ],
    )
