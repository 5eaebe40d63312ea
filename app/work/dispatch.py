"""Long-polling selects, woken by inserts, in worker-weight order.

Servers waiting in `POST /v1/work/select` wait here, in this process, on an asyncio event each; one Redis
pub/sub connection per process carries the insert notifications (a thousand waiting servers need no thousand
Redis connections). A notification for n new requests of an environment wakes the n best waiters: highest
worker weight first, overflow servers last, and among equals the one served longest ago (round robin). The
woken waiter takes its work with the select script, which re-checks capacity atomically; one that finds
nothing left waits again. Waiters also retry once a second, so a lost notification delays, never strands.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from redis.asyncio import Redis

from app.broadcast import Message, Subscription

POLL_FALLBACK_SECONDS = 1.0
MAX_REMEMBERED_SERVERS = 100_000


@dataclass(eq=False)
class Waiter:
    node: str
    ae: str
    server_id: int
    weight: int
    overflow: bool
    event: asyncio.Event = field(default_factory=asyncio.Event)


def wake_order(waiters: list[Waiter], last_served: dict[int, int]) -> list[Waiter]:
    """Pure: who gets the next requests. Non-overflow before overflow, higher weight first, then least recently served."""
    return sorted(waiters, key=lambda w: (w.overflow, -w.weight, last_served.get(w.server_id, -1)))


class Dispatcher:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self.pattern = f"{prefix}:notify:*"
        self.channel_prefix = f"{prefix}:notify:"
        self._waiters: dict[tuple[str, str], list[Waiter]] = {}
        self._last_served: dict[int, int] = {}
        self._serial = itertools.count()
        # While it is down, waiters fall back to polling.
        self._notifications = Subscription(redis, "insert notifications", self._on_notification, patterns=[self.pattern])
        # Set when the process is stopping: waiting selects answer at once, and none waits any more.
        self.draining = False

    async def start(self) -> None:
        self._notifications.start()

    async def stop(self) -> None:
        await self._notifications.stop()

    def drain(self) -> None:
        self.draining = True
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.event.set()

    def register(self, waiter: Waiter) -> None:
        self._waiters.setdefault((waiter.node, waiter.ae), []).append(waiter)

    def unregister(self, waiter: Waiter) -> None:
        waiters = self._waiters.get((waiter.node, waiter.ae))
        if waiters and waiter in waiters:
            waiters.remove(waiter)

    def served(self, server_id: int) -> None:
        self._last_served[server_id] = next(self._serial)
        if len(self._last_served) > MAX_REMEMBERED_SERVERS:  # departed servers: forget the longest unserved
            for old in sorted(self._last_served, key=self._last_served.__getitem__)[: MAX_REMEMBERED_SERVERS // 2]:
                del self._last_served[old]

    def notify(self, node: str, ae: str, count: int) -> None:
        waiting = [w for w in self._waiters.get((node, ae), ()) if not w.event.is_set()]
        for waiter in wake_order(waiting, self._last_served)[:count]:
            waiter.event.set()

    def _on_notification(self, message: Message) -> None:
        node, _, ae = str(message["channel"])[len(self.channel_prefix) :].partition(":")
        self.notify(node, ae, int(message["data"]))
