"""Advisories: events named like Rendezvous subjects (`WLM.INFO.SCHEDULER.ACTIVE.<member>`), appended to one capped
Redis stream that every replica reads, so a subscriber on any replica sees every replica's events, in one order.

Subjects (TIBCO Rendezvous's `_RV.INFO.RVCM.QUEUE.SCHEDULER.ACTIVE.>` and its kin):
- WLM.INFO.SCHEDULER.ACTIVE.<member>, WLM.INFO.SCHEDULER.INACTIVE.<member>
- WLM.WARN.QUEUE.BACKLOG_LIMIT.<environment> ("task backlog limit reached")
- WLM.INFO.APPLENV.STATE.<environment>
- WLM.WARN.SERVER.STOPPED.<environment>
- WLM.WARN.REQUEST.ABANDONED.<environment>

`EventStreams` serves the stream to subscribers (GET /v1/events) as Server-Sent Events.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from app.errors import TooManyRequests, ValidationFailed
from app.events.advisories import Advisories, Advisory, AdvisoryReader
from app.events.schemas import EventOut
from app.redis.context import RedisContext
from app.web.shutdown import ShutdownNotice

log = logging.getLogger(__name__)

_ELEMENT = r"[A-Za-z0-9_-]+"
SUBJECT_ELEMENT = re.compile(_ELEMENT)
# subject_matcher's grammar as one expression, for the OpenAPI document (it refuses the same texts, saying which
# element is wrong): elements or `*` joined by dots, the last of which may be `>`.
SUBJECT_PATTERN = rf"^(({_ELEMENT}|\*)\.)*({_ELEMENT}|\*|>)$"
# An idle stream sends a comment this often, so proxies and clients know it is alive.
KEEPALIVE_SECONDS = 15.0
READ_BATCH = 500


def subject(*elements: str) -> str:
    return ".".join(elements)


def subject_matcher(pattern: str) -> re.Pattern[str]:
    """A Rendezvous subject pattern: `*` matches one element, `>` (last) the rest; raises ValueError if malformed."""
    elements = pattern.split(".")
    parts = []
    for index, element in enumerate(elements):
        if element == ">" and index == len(elements) - 1:
            parts.append(r"[^.]+(\.[^.]+)*")
        elif element == "*":
            parts.append(r"[^.]+")
        elif SUBJECT_ELEMENT.fullmatch(element):  # not match with `$`, which would take a trailing newline
            parts.append(re.escape(element))
        else:
            raise ValueError(f"element {index + 1} of {pattern!r}: use letters, digits, _ or -, or * for one element and > at the end")
    return re.compile(r"\.".join(parts) + "$")


async def publish(context: RedisContext, name: str, **data: Any) -> str | None:
    """Append an advisory; returns its id in the stream (the SSE event id), or None when Redis could not take it:
    an advisory announces what happened, so failing to announce it must not undo or fail the thing itself."""
    # No time of its own: the stream id is Redis's clock (EventStreams reads the instant from it).
    try:
        return await Advisories(context).append(name, json.dumps(data))
    except RedisError as exc:
        log.warning("advisory %s not published: %s", name, exc)
        return None


def _server_sent(advisory: Advisory) -> bytes:
    at = int(advisory.id.split("-", 1)[0]) / 1000
    event = EventOut(id=advisory.id, subject=advisory.subject, at=at, data=json.loads(advisory.data))
    return f"id: {advisory.id}\nevent: {event.subject}\ndata: {event.model_dump_json()}\n\n".encode()


class EventStreams:
    """The advisory streams this replica serves, at most `max_subscribers` at once. Each blocks on `reader`, a
    client of its own, so a stream never holds one of the API's connections."""

    def __init__(self, advisories: Advisories, reader: AdvisoryReader, max_subscribers: int, shutdown: ShutdownNotice) -> None:
        self.advisories, self.reader, self.max_subscribers, self.shutdown = advisories, reader, max_subscribers, shutdown
        self.subscribers = 0

    async def subscribe(
        self,
        pattern: str,
        disconnected: Callable[[], Awaitable[bool]],
        *,
        since: str | None = None,
        last: int | None = None,
        last_event_id: str | None = None,
    ) -> AsyncIterator[bytes]:
        """The Server-Sent Events of the advisories whose subject matches `pattern`: resumed after what the client
        saw (`last_event_id`), or replayed from `since` or the `last` few, or from what comes next. Refused here,
        before the stream starts, when the pattern is malformed or this replica serves its most streams already;
        it ends when the process stops (the client resumes elsewhere) or `disconnected()` says the client left."""
        try:
            matcher = subject_matcher(pattern)
        except ValueError as exc:
            raise ValidationFailed([{"path": "subject", "message": str(exc)}]) from exc
        if self.subscribers >= self.max_subscribers:
            raise TooManyRequests(
                f"this replica serves {self.max_subscribers} event streams already; try another or later", code="too_many_subscribers"
            )
        # The slot is taken before anything is awaited, so a burst cannot get past the limit; the stream gives it back.
        self.subscribers += 1
        try:
            position = last_event_id or since or (await self.advisories.position_before(last or 0))
        except BaseException:
            self.subscribers -= 1
            raise
        return self._feed(matcher, position, disconnected)

    async def _feed(self, matcher: re.Pattern[str], position: str, disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        try:
            yield b": advisories\n\n"
            async for chunk in self._entries(matcher, position, disconnected):
                yield chunk
        finally:
            self.subscribers -= 1

    async def _entries(self, matcher: re.Pattern[str], position: str, disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        while not self.shutdown.given and not await disconnected():
            read, advisories = await self.shutdown.unless_given(self.reader.read_after(position, READ_BATCH, int(KEEPALIVE_SECONDS * 1000)))
            if not read:
                return  # the process is stopping: the client resumes elsewhere from its Last-Event-ID
            if not advisories:
                yield b": keepalive\n\n"
                continue
            for advisory in advisories:
                position = advisory.id
                if matcher.match(advisory.subject):
                    yield _server_sent(advisory)
