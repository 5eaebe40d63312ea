"""The per-process cache: expiry, one load per key at a time, background reload past half life."""

from __future__ import annotations

import asyncio
import gc

import pytest

from app.errors import NotFound
from app.shared import ttl_cache
from app.shared.ttl_cache import TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(ttl_cache.time, "monotonic", fake)
    return fake


class Source:
    """Counts loads; each load returns its own number (as a read returns what was there when it began), or raises
    what `fail` holds."""

    def __init__(self) -> None:
        self.loads = 0
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def load(self) -> int:
        self.loads += 1
        number = self.loads
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return number


async def _settle() -> None:
    """Turns of the event loop, not time (so a busy machine changes nothing): enough for a background load begun
    now (it waits on nothing but the test's gate) to run to its end, and for a wrong second one to show."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_fresh_entry_is_served_without_a_load(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    assert await cache.get_or_load("k", source.load) == 1
    clock.now += 4.9
    assert await cache.get_or_load("k", source.load) == 1
    assert source.loads == 1


async def test_past_half_life_the_entry_serves_while_one_background_load_replaces_it(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    await cache.get_or_load("k", source.load)
    clock.now += 6
    assert [await cache.get_or_load("k", source.load) for _ in range(3)] == [1, 1, 1]  # nobody waits
    await _settle()
    assert source.loads == 2  # one reload, not three
    assert await cache.get_or_load("k", source.load) == 2


async def test_an_expired_entry_makes_concurrent_callers_share_one_load(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    await cache.get_or_load("k", source.load)
    clock.now += 10
    source.gate = asyncio.Event()
    waiting = [asyncio.create_task(cache.get_or_load("k", source.load)) for _ in range(20)]
    await _settle()
    source.gate.set()
    assert await asyncio.gather(*waiting) == [2] * 20
    assert source.loads == 2


async def test_a_source_that_says_gone_ends_the_entry_at_the_background_reload(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    await cache.get_or_load("k", source.load)
    clock.now += 6
    source.fail = NotFound("revoked", code="invalid_api_key")
    assert await cache.get_or_load("k", source.load) == 1  # the reload runs behind this answer
    await _settle()
    with pytest.raises(NotFound):
        await cache.get_or_load("k", source.load)


async def test_an_unreachable_source_leaves_the_entry_until_it_expires(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    await cache.get_or_load("k", source.load)
    clock.now += 6
    source.fail = ConnectionError("database down")
    assert await cache.get_or_load("k", source.load) == 1
    await _settle()
    assert await cache.get_or_load("k", source.load) == 1  # still served
    clock.now += 4
    with pytest.raises(ConnectionError):
        await cache.get_or_load("k", source.load)


async def test_a_clear_during_a_load_is_not_undone_by_it(clock: Clock) -> None:
    cache, source = TtlCache[int](10), Source()
    source.gate = asyncio.Event()
    loading = asyncio.create_task(cache.get_or_load("k", source.load))
    await _settle()
    cache.clear()  # e.g. a key revoked while its lookup was under way
    source.gate.set()
    assert await loading == 1
    assert cache.get("k") is None


async def test_a_caller_after_a_clear_does_not_join_the_load_begun_before_it(clock: Clock) -> None:
    """A policy installed while a reload was reading the old one: the next caller must get the new one."""
    cache, source = TtlCache[int](10), Source()
    source.gate = asyncio.Event()
    before = asyncio.create_task(cache.get_or_load("k", source.load))
    await _settle()
    cache.clear()
    after = asyncio.create_task(cache.get_or_load("k", source.load))
    await _settle()
    source.gate.set()
    assert (await before, await after) == (1, 2)
    assert cache.get("k") == 2
    assert await cache.get_or_load("k", source.load) == 2 and source.loads == 2


async def test_a_cache_with_no_ttl_loads_every_time(clock: Clock) -> None:
    cache, source = TtlCache[int](0), Source()
    assert [await cache.get_or_load("k", source.load) for _ in range(3)] == [1, 2, 3]


async def test_a_failed_load_whose_callers_went_away_is_not_reported_as_never_retrieved() -> None:
    """A request cancelled (its client gone) while the load it waits for fails: the failure is the source's answer,
    and no one is left to hear it; asyncio must not log it as an exception never retrieved."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        cache, source = TtlCache[int](10), Source()
        source.gate, source.fail = asyncio.Event(), NotFound("gone")
        caller = asyncio.create_task(cache.get_or_load("k", source.load))
        await _settle()
        caller.cancel()
        source.gate.set()
        await _settle()
        del caller
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(previous)
