from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from app.deps import StateDep, Viewer
from app.errors import TooManyRequests, ValidationFailed
from app.queues.keys import events_key
from app.scheduler.advisories import subject_matcher
from app.scheduler.schemas import EventOut, MemberOut, SchedulerOut
from app.scheduler.service import scheduler_status
from app.state import AppState

router = APIRouter(prefix="/v1", tags=["scheduler"])

# An idle stream sends a comment this often, so proxies and clients know it is alive.
KEEPALIVE_SECONDS = 15.0


def _moment(ms: str | None) -> datetime | None:
    return datetime.fromtimestamp(int(ms) / 1000, UTC) if ms else None


@router.get("/scheduler", response_model=SchedulerOut, summary="Who holds the scheduler's role, its epoch, and the members")
async def scheduler(state: StateDep, _: Viewer) -> SchedulerOut:
    settings = state.settings
    holder, members = await scheduler_status(state.redis, settings.redis_prefix)
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
            MemberOut(member=m.member, weight=m.weight, seen_ms_ago=m.seen_ms_ago, live=m.seen_ms_ago <= activation_ms, host=m.info.get("host"), pid=m.info.get("pid"))
            for m in members
        ],
    )


@router.get(
    "/events",
    summary="Advisories as Server-Sent Events, filtered by subject pattern (* one element, > the rest)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "`event:` subject, `id:` stream id, `data:` EventOut as JSON"}},
)
async def events(
    request: Request,
    state: StateDep,
    _: Viewer,
    subject: Annotated[str, Query(max_length=256, description="e.g. WLM.INFO.SCHEDULER.> or WLM.*.*.*.PAYROLL")] = ">",
    since: Annotated[str | None, Query(max_length=64, pattern=r"^(0|\d{1,19}-\d{1,19})$", description="replay from after this event id (0: all kept)")] = None,
    last: Annotated[int | None, Query(ge=1, le=1000, description="replay the last this many kept (of every subject), then follow")] = None,
    last_event_id: Annotated[str | None, Header(max_length=64, pattern=r"^\d{1,19}-\d{1,19}$")] = None,
) -> StreamingResponse:
    try:
        matcher = subject_matcher(subject)
    except ValueError as exc:
        raise ValidationFailed([{"path": "subject", "message": str(exc)}]) from exc
    if state.event_subscribers >= state.settings.events_max_subscribers:
        raise TooManyRequests(f"this replica serves {state.settings.events_max_subscribers} event streams already; try another or later", code="too_many_subscribers")
    # The slot is taken before anything is awaited, so a burst cannot get past the limit; the stream gives it back.
    state.event_subscribers += 1
    stream = events_key(state.settings.redis_prefix)
    try:
        # Resume after what the client saw (its Last-Event-ID), or replay from `since` or the `last` few, or start
        # with what comes next.
        position = last_event_id or since or (await _position_before(state, stream, last or 0))
    except BaseException:
        state.event_subscribers -= 1
        raise

    async def feed() -> AsyncIterator[bytes]:
        try:
            yield b": advisories\n\n"
            async for chunk in entries():
                yield chunk
        finally:
            state.event_subscribers -= 1

    async def entries() -> AsyncIterator[bytes]:
        nonlocal position
        while not state.shutdown.given and not await request.is_disconnected():
            read, replies = await state.shutdown.unless_given(
                state.events_redis.xread({stream: position}, count=500, block=int(KEEPALIVE_SECONDS * 1000))
            )
            if not read:
                return  # the process is stopping: the client resumes elsewhere from its Last-Event-ID
            if not replies:
                yield b": keepalive\n\n"
                continue
            for entry_id, fields in replies[0][1]:
                position = entry_id
                if not matcher.match(fields["subject"]):
                    continue
                event = EventOut(id=entry_id, subject=fields["subject"], at=int(entry_id.split("-", 1)[0]) / 1000, data=json.loads(fields["data"]))
                yield f"id: {entry_id}\nevent: {event.subject}\ndata: {event.model_dump_json()}\n\n".encode()

    return StreamingResponse(feed(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _position_before(state: AppState, stream: str, count: int) -> str:
    """The id after which the last `count` entries come (0: after the latest)."""
    latest = await state.redis.xrevrange(stream, count=count + 1)
    return latest[count][0] if len(latest) > count else "0-0"

