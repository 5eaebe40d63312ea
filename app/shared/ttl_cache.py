"""A small per-process cache whose entries expire, for lookups that every call on a hot path would repeat."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from app.errors import AppError

V = TypeVar("V")
log = logging.getLogger(__name__)


class TtlCache(Generic[V]):
    """Entries live `ttl_seconds` (0 turns the cache off); the oldest go first past `max_entries`.

    `get_or_load` keeps a busy key from ever waiting on its source: past half its life an entry is reloaded in
    the background while it still serves, and only an expired or missing entry makes callers wait, for one load
    shared by all of them (no stampede on the database when a popular entry expires)."""

    def __init__(self, ttl_seconds: float, max_entries: int = 10_000) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()  # key -> (loaded at, value)
        self._loading: dict[str, asyncio.Task[V]] = {}
        self._generation = 0  # bumped by clear(): a load that began before it must not put back what it cleared

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry[0] >= self.ttl:
            return None
        return entry[1]

    def put(self, key: str, value: V) -> None:
        if self.ttl <= 0:
            return
        self._entries[key] = (time.monotonic(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: str) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
        # Callers after the clear start a load of their own: one begun before may have read what was cleared.
        self._loading.clear()
        self._generation += 1

    async def get_or_load(self, key: str, load: Callable[[], Awaitable[V]]) -> V:
        entry = self._entries.get(key)
        if entry is not None:
            age = time.monotonic() - entry[0]
            if age < self.ttl:
                if age >= self.ttl / 2 and key not in self._loading:
                    self._start(key, load).add_done_callback(self._background_done)
                return entry[1]
        task = self._loading.get(key) or self._start(key, load)
        return await asyncio.shield(task)  # a caller that goes away does not cancel the others' load

    def _start(self, key: str, load: Callable[[], Awaitable[V]]) -> asyncio.Task[V]:
        task = asyncio.create_task(self._load(key, load, self._generation))
        # Its callers await it through a shield: if they all went away, its failure would be logged as never retrieved.
        task.add_done_callback(retrieve)
        self._loading[key] = task
        return task

    async def _load(self, key: str, load: Callable[[], Awaitable[V]], generation: int) -> V:
        try:
            value = await load()
        except AppError:
            self.pop(key)  # the source answered that it is gone (a revoked key, a closed connection): stop serving it
            raise
        finally:
            if self._loading.get(key) is asyncio.current_task():
                self._loading.pop(key)
        if generation == self._generation:
            self.put(key, value)
        return value

    @staticmethod
    def _background_done(task: asyncio.Task[V]) -> None:
        # A background reload that failed for want of its source (database or Redis down) leaves the entry to
        # serve until it expires; the next foreground load reports the outage.
        if not task.cancelled() and (exc := task.exception()) is not None and not isinstance(exc, AppError):
            log.warning("background reload failed: %s", exc)


def retrieve(task: asyncio.Task[V]) -> None:
    """A done callback: the task's failure counts as retrieved (its callers await it through a shield)."""
    if not task.cancelled():
        task.exception()
