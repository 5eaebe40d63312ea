"""Advisories: events named like Rendezvous subjects (`WLM.INFO.SCHEDULER.ACTIVE.<member>`), appended to one capped
Redis stream that every replica reads, so a subscriber on any replica sees every replica's events, in one order.

Subjects (the seed's `_RV.INFO.RVCM.QUEUE.SCHEDULER.ACTIVE.>` and its kin):
- WLM.INFO.SCHEDULER.ACTIVE.<member>, WLM.INFO.SCHEDULER.INACTIVE.<member>
- WLM.WARN.QUEUE.BACKLOG_LIMIT.<environment> ("task backlog limit reached")
- WLM.INFO.APPLENV.STATE.<environment>
- WLM.WARN.SERVER.STOPPED.<environment>
- WLM.WARN.REQUEST.ABANDONED.<environment>
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.queues.keys import events_key

log = logging.getLogger(__name__)

# How many advisories the stream keeps (approximately: trimming is by whole nodes of the stream).
EVENTS_KEPT = 100_000
SUBJECT_ELEMENT = re.compile(r"^[A-Za-z0-9_\-]+$")


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
        elif SUBJECT_ELEMENT.match(element):
            parts.append(re.escape(element))
        else:
            raise ValueError(f"element {index + 1} of {pattern!r}: use letters, digits, _ or -, or * for one element and > at the end")
    return re.compile(r"\.".join(parts) + "$")


async def publish(redis: Redis, prefix: str, name: str, **data: Any) -> str | None:
    """Append an advisory; returns its id in the stream (the SSE event id), or None when Redis could not take it:
    an advisory announces what happened, so failing to announce it must not undo or fail the thing itself."""
    # No time of its own: the stream id is Redis's clock (app/scheduler/router.py reads the instant from it).
    entry = {"subject": name, "data": json.dumps(data)}
    try:
        return str(await redis.xadd(events_key(prefix), entry, maxlen=EVENTS_KEPT, approximate=True))
    except RedisError as exc:
        log.warning("advisory %s not published: %s", name, exc)
        return None
