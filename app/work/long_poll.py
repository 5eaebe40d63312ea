"""Long-polling selects, woken by inserts, in worker-weight order.

Servers waiting in `POST /v1/work/select` wait here, in this process, on an asyncio event each; a Redis pub/sub
connection per process and primary carries the wake-ups (a thousand waiting servers need no thousand Redis
connections).

A select that finds nothing lists its waiter in Redis, in the same script call (so no insert can come between the
look and the listing). An insert of n requests takes the n best listed waiters (highest worker weight first,
overflow servers last, then the least recently served) and wakes each through its own process's channel: only the
processes holding those servers run a select. The script learns from PUBLISH's answer whether the process still
listens; a cluster's PUBLISH counts only the subscribers of the node it ran on, so a process has a wake channel on
each primary, subscribed there alone, and a waiter is listed under the one of its environment's primary, where the
scripts that wake it run: a wake-up is counted and heard once (app/redis/broadcast.py, OnEveryPrimary). One listed
under a primary that no longer holds the slot (a failover, a slot moved) is not heard there: its wake-up goes to
the environment's notify channel. A woken waiter takes its work with the select script, which re-checks capacity
atomically; one that finds nothing left is listed again and waits again.

Work beyond the listed waiters wakes nobody (every waiting server is listed). What a process is woken for but no
longer waits for (its server left, or is selecting already) goes to another free waiter of the process or to the
environment's notify channel, which every process hears: each wakes its best free waiters, highest weight first and
among equals the one served longest ago.
So does a wake-up its waiter leaves without using (its select was refused, or its poll ended as it came). After a
primary's subscription was down, every waiter of its environments selects once. Waiters also retry once a second,
so a lost wake-up delays, never strands.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.queues.keys import ae_keys, notify_channel, notify_channel_pattern, notify_channel_place, wake_prefix
from app.redis.broadcast import Message, OnEveryPrimary
from app.redis.topology import STANDALONE, slot_owner

log = logging.getLogger(__name__)

POLL_FALLBACK_SECONDS = 1.0
MAX_REMEMBERED_SERVERS = 100_000
BACKGROUND_STOP_SECONDS = 2.0


@dataclass(eq=False)
class Waiter:
    node: str
    ae: str
    server_id: int
    weight: int
    overflow: bool
    event: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = ""  # given by Dispatcher.register: `member` is `<process>[@<primary>]:<name>` in Redis's list of waiters
    member: str = ""
    # A wake-up meant for this waiter alone (an insert took it off the list) that no select has used yet: one that
    # leaves unused, passes it on (Dispatcher.pass_on), or the work would wait for another's once-a-second retry.
    owes_wake: bool = False
    # When the last wake-up came (epoch seconds), kept only where the process times requests (app/web/timing.py).
    woken_at: float = 0.0


def wake_order(waiters: list[Waiter], last_served: dict[int, int]) -> list[Waiter]:
    """Pure: who gets the next requests. Non-overflow before overflow, higher weight first, then least recently served."""
    return sorted(waiters, key=lambda w: (w.overflow, -w.weight, last_served.get(w.server_id, -1)))


def parse_wake(data: str) -> tuple[list[str], str]:
    """Pure: a wake-up's waiter names and the notify channel of their environment (as wake in lua/includes/wake.lua writes it)."""
    names, _, channel = data.partition("\n")
    return names.split(), channel


class Dispatcher:
    def __init__(self, redis: Redis, prefix: str, *, timed: bool = False) -> None:
        """`timed`: waiters keep when they were woken, for the requests' timing (app/web/timing.py)."""
        self.process = secrets.token_hex(6)
        self._timed = timed
        self.prefix = prefix
        self._redis = redis
        self._waiters: dict[tuple[str, str], list[Waiter]] = {}
        self._named: dict[str, Waiter] = {}
        self._names = itertools.count()
        self._last_served: dict[int, int] = {}
        self._serial = itertools.count()
        self._background: set[asyncio.Task[None]] = set()
        self._stopping = False
        # While one is down, waiters fall back to polling; wake-ups published meanwhile are lost, so every waiter of
        # the primary's environments selects once when it is back (and the first time it is confirmed).
        self._notifications = OnEveryPrimary(
            redis,
            "insert notifications",
            self._on_message,
            slot_key=self._slot_key,
            own_channel=self.wake_channel,
            patterns=[notify_channel_pattern(prefix)],
            on_subscribed=self._wake_all_of,
        )
        # Set when the process is stopping: waiting selects answer at once, and none waits any more.
        self.draining = False

    async def start(self) -> None:
        self._notifications.start()

    async def stop(self) -> None:
        self._stopping = True
        await self._notifications.stop()
        if self._background:
            _, late = await asyncio.wait(self._background, timeout=BACKGROUND_STOP_SECONDS)
            for task in late:
                task.cancel()

    def drain(self) -> None:
        self.draining = True
        self._wake_all()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                self._wake(waiter)

    def _wake_all_of(self, primary: str) -> None:
        """Every waiter of the environments whose messages `primary`'s subscription keeps, or may have kept while
        another was down: those whose scripts run on it, and those whose primary is not known or not heard now."""
        listening = self._notifications.listening()
        for (node, ae), waiters in self._waiters.items():
            owner = slot_owner(self._redis, ae_keys(self.prefix, node, ae).tag)
            if owner == primary or owner not in listening:
                for waiter in waiters:
                    self._wake(waiter)

    def _wake(self, waiter: Waiter) -> None:
        if self._timed:
            waiter.woken_at = time.time()
        waiter.event.set()

    def wake_channel(self, primary: str | None) -> str:
        """This process's wake channel on `primary` (as lua/includes/wake.lua names it from a listed waiter): a
        standalone server's is the process's own name; that of no known primary (`None`), a channel nobody hears."""
        return wake_prefix(self.prefix) + self._listed_as(primary)

    def _listed_as(self, primary: str | None) -> str:
        return self.process if primary == STANDALONE else f"{self.process}@{primary or ''}"

    def register(self, waiter: Waiter) -> None:
        waiter.name = str(next(self._names))
        primary = slot_owner(self._redis, ae_keys(self.prefix, waiter.node, waiter.ae).tag)
        waiter.member = f"{self._listed_as(primary)}:{waiter.name}"
        self._waiters.setdefault((waiter.node, waiter.ae), []).append(waiter)
        self._named[waiter.name] = waiter

    def unregister(self, waiter: Waiter) -> None:
        waiters = self._waiters.get((waiter.node, waiter.ae))
        if waiters and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._waiters[(waiter.node, waiter.ae)]
        self._named.pop(waiter.name, None)

    def served(self, server_id: int) -> None:
        self._last_served[server_id] = next(self._serial)
        if len(self._last_served) > MAX_REMEMBERED_SERVERS:  # departed servers: forget the longest unserved
            for old in sorted(self._last_served, key=self._last_served.__getitem__)[: MAX_REMEMBERED_SERVERS // 2]:
                del self._last_served[old]

    def notify(self, node: str, ae: str, count: int, *, owed: bool = False) -> int:
        """Wakes up to `count` of this process's free waiters for the environment and node; returns how many.
        `owed`: the wake-ups were meant for one waiter each (not heard by every process), so each must be used or
        passed on."""
        waiting = [w for w in self._waiters.get((node, ae), ()) if not w.event.is_set()]
        woken = wake_order(waiting, self._last_served)[:count]
        for waiter in woken:
            waiter.owes_wake = waiter.owes_wake or owed
            self._wake(waiter)
        return len(woken)

    def pass_on(self, waiter: Waiter) -> None:
        """A waiter leaves owing a wake-up (its select ended, was refused, or the poll's time was up as it came):
        another free waiter here takes it, or every process hears it."""
        waiter.owes_wake = False
        if self.draining or not self.notify(waiter.node, waiter.ae, 1, owed=True):
            channel = notify_channel(self.prefix, waiter.node, waiter.ae)
            self.in_background(self._publish(channel, 1), "pass a wake-up on to every process")

    def in_background(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Runs Redis `work` the caller need not wait for; a failure is logged (the fallback poll covers it)."""

        async def run() -> None:
            try:
                await work
            except RedisError as exc:
                log.warning("could not %s: %s", what, exc)

        if self._stopping:  # Redis is about to close
            work.close()
            return
        task = asyncio.ensure_future(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_message(self, message: Message) -> None:
        channel = str(message["channel"])
        if message["type"] == "message":  # a wake channel (the notify channels are a pattern's)
            self._on_wake(str(message["data"]))
        else:
            node, ae = notify_channel_place(self.prefix, channel)
            count = str(message["data"])
            if count.isdigit():  # (anyone may publish there: a count is all it takes)
                self.notify(node, ae, int(count))

    def _slot_key(self, message: Message) -> str:
        """A key of the environment of a notify channel's message."""
        return ae_keys(self.prefix, *notify_channel_place(self.prefix, str(message["channel"]))).tag

    def _on_wake(self, data: str) -> None:
        names, channel = parse_wake(data)
        missed = 0
        for name in names:
            waiter = self._named.get(name)
            if waiter is None or waiter.event.is_set():
                missed += 1
            else:
                waiter.owes_wake = True
                self._wake(waiter)
        if missed:
            node, ae = notify_channel_place(self.prefix, channel)
            missed -= self.notify(node, ae, missed, owed=True)
        if missed:
            self.in_background(self._publish(channel, missed), "pass a wake-up on to every process")

    async def _publish(self, channel: str, count: int) -> None:
        await self._redis.publish(channel, count)
