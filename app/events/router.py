from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from app.deps import EventStreamsDep, Viewer
from app.events.service import SUBJECT_PATTERN

# Tagged with the scheduler, whose advisories it first carried: the tag names the operation (`scheduler-events`),
# which generated clients call by that name.
router = APIRouter(prefix="/v1", tags=["scheduler"])


# A stream id, or 0 for all kept. [0-9] rather than \d: the service's \d takes other digits than the OpenAPI
# document's (ECMA-262) one, and the two must agree.
EVENT_ID = r"^(0|[0-9]{1,19}-[0-9]{1,19})$"


@router.get(
    "/events",
    summary="Advisories as Server-Sent Events, filtered by subject pattern (* one element, > the rest)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "`event:` subject, `id:` stream id, `data:` EventOut as JSON"}},
)
async def events(
    request: Request,
    streams: EventStreamsDep,
    _: Viewer,
    subject: Annotated[
        str,
        # Declared rather than enforced: subject_matcher refuses the same texts, naming the element that is wrong.
        Query(max_length=256, description="e.g. WLM.INFO.SCHEDULER.> or WLM.*.*.*.PAYROLL", json_schema_extra={"pattern": SUBJECT_PATTERN}),
    ] = ">",
    since: Annotated[
        str | None, Query(max_length=64, pattern=EVENT_ID, description="replay from after this event id (0: all kept)")
    ] = None,
    last: Annotated[int | None, Query(ge=1, le=1000, description="replay the last this many kept (of every subject), then follow")] = None,
    last_event_id: Annotated[
        str | None, Header(max_length=64, pattern=EVENT_ID, description="as `since`; an EventSource sends it when it reconnects")
    ] = None,
) -> StreamingResponse:
    feed = await streams.subscribe(subject, request.is_disconnected, since=since, last=last, last_event_id=last_event_id)
    return StreamingResponse(feed, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
