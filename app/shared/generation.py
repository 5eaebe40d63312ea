"""One counter in the database that every change of the settings processes cache moves (the policy and the dynamic
application environments, the operator states, the routing overrides), so that a process keeps its copies until
the counter says one of them changed, and reads one number, not every table, to know it is still current."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from sqlalchemy import BigInteger, CheckConstraint, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.shared.ttl_cache import TtlCache, retrieve

V = TypeVar("V")


class SettingsGeneration(Base):
    """The counter's one row: how many changes of the cached settings were committed (no row yet: none)."""

    __tablename__ = "settings_generation"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


async def count_change(session: AsyncSession) -> None:
    """Count a change of the cached settings in its transaction, as the last statement before the commit: the row
    stays locked until then, so the counter moves in the order the changes commit, and a transaction holding it
    waits for no other lock. An upsert, so that an emptied table (a test's TRUNCATE) counts again from 1."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(SettingsGeneration).values(id=1, value=1)
    await session.execute(statement.on_conflict_do_update(index_elements=["id"], set_={"value": SettingsGeneration.value + 1}))


async def read_generation(session: AsyncSession) -> int:
    return await session.scalar(select(SettingsGeneration.value)) or 0


class Generations:
    """The counter as this process last read it: read again like any TtlCache entry (in the background past half
    its time), so a change committed on another replica is seen within `ttl_seconds`."""

    KEY = "generation"

    def __init__(self, sessions: async_sessionmaker[AsyncSession], ttl_seconds: float) -> None:
        self.sessions = sessions
        self._counter: TtlCache[int] = TtlCache(ttl_seconds)

    async def current(self) -> int:
        return await self._counter.get_or_load(self.KEY, self._read)

    async def _read(self) -> int:
        async with self.sessions() as session:
            return await read_generation(session)


class GatedValue(Generic[V]):
    """A value read from the database (`load`, in a session of its own), read again only when the counter has moved
    past the count it was read at, or after `clear` (a change on this process). Callers that find it out of date
    wait for one read shared by them all."""

    def __init__(self, generations: Generations, load: Callable[[AsyncSession], Awaitable[V]]) -> None:
        self.generations = generations
        self._load_value = load
        self._entry: tuple[int, V] | None = None  # (the counter when read, the value)
        self._loading: asyncio.Task[tuple[int, V]] | None = None
        self._cleared = 0  # bumped by clear(): a read that began before it must not put back what it cleared

    async def get(self) -> V:
        generation = await self.generations.current()
        entry = self._entry
        if entry is not None and entry[0] >= generation:
            return entry[1]
        if self._loading is None:
            self._loading = asyncio.create_task(self._load(self._cleared))
            self._loading.add_done_callback(retrieve)
        return (await asyncio.shield(self._loading))[1]  # a caller that goes away does not cancel the others' read

    def clear(self) -> None:
        self._entry = None
        self._loading = None
        self._cleared += 1

    async def _load(self, cleared: int) -> tuple[int, V]:
        try:
            async with self.generations.sessions() as session:
                # The counter first: what is read after it is at least as new, so no change it counts is missed.
                generation = await read_generation(session)
                entry = (generation, await self._load_value(session))
        finally:
            if self._loading is asyncio.current_task():
                self._loading = None
        if cleared == self._cleared:
            self._entry = entry
        return entry
