"""The stop notice (app/web/shutdown.py): given once, racing what waits on it, and chained in front of whatever
handled SIGTERM and SIGINT before."""

from __future__ import annotations

import asyncio
import signal

import pytest

from app.web.shutdown import ShutdownNotice, given_on_stop_signals
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio


async def _blocking_read(reading: asyncio.Event, cancelled: asyncio.Event) -> None:
    """A read that blocks far longer than any test; `reading` is set as it begins, `cancelled` if it is cancelled."""
    reading.set()
    try:
        await asyncio.sleep(30)  # the blocking read itself
    except asyncio.CancelledError:
        cancelled.set()
        raise


async def test_the_notice_runs_its_callbacks_once():
    notice = ShutdownNotice()
    calls: list[str] = []
    notice.on_notice(lambda: calls.append("drain"))
    assert not notice.given
    notice.give()
    notice.give()
    assert notice.given and calls == ["drain"]


async def test_what_finishes_first_wins_the_race_with_the_notice():
    notice = ShutdownNotice()
    assert await notice.unless_given(asyncio.sleep(0, result="read")) == (True, "read")

    reading, cancelled = asyncio.Event(), asyncio.Event()
    racing = asyncio.create_task(notice.unless_given(_blocking_read(reading, cancelled)))
    await asyncio.wait_for(reading.wait(), 5)
    notice.give()
    assert await asyncio.wait_for(racing, 1) == (False, None)
    assert cancelled.is_set()


async def test_the_notice_wins_over_a_read_that_ignores_its_cancellation():
    """redis-py can swallow a cancellation that arrives while it sends a command, and go on blocking (seen: an
    XREAD cancelled within a millisecond of its start kept a stopping service's event stream open for its 15 s)."""

    async def stubborn_read(reading: asyncio.Event, released: asyncio.Event) -> str:
        reading.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await released.wait()  # swallowed: blocks on until the test lets it go
        return "late"

    notice = ShutdownNotice()
    reading, released = asyncio.Event(), asyncio.Event()
    racing = asyncio.create_task(notice.unless_given(stubborn_read(reading, released)))
    await asyncio.wait_for(reading.wait(), 5)
    notice.give()
    assert await asyncio.wait_for(racing, 20) == (False, None)  # the dropped read's "late" is never answered
    released.set()


async def test_cancelling_the_race_cancels_what_it_waits_for():
    """A client that goes away cancels its stream: the blocking read it was in must not outlive it."""
    reading, cancelled = asyncio.Event(), asyncio.Event()
    racing = asyncio.create_task(ShutdownNotice().unless_given(_blocking_read(reading, cancelled)))
    await asyncio.wait_for(reading.wait(), 5)
    racing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racing
    assert cancelled.is_set()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_gives_the_notice_and_still_reaches_the_handler_before(stop_signal):
    received: list[int] = []
    before = signal.signal(stop_signal, lambda sig, frame: received.append(sig))
    try:
        notice = ShutdownNotice()
        handler_before = signal.getsignal(stop_signal)
        with given_on_stop_signals(notice):
            assert signal.getsignal(stop_signal) is not handler_before
            signal.raise_signal(stop_signal)
            await eventually(lambda: notice.given, what="the notice given (on the event loop)")
            assert received == [stop_signal]
        assert signal.getsignal(stop_signal) is handler_before  # put back as it was
    finally:
        signal.signal(stop_signal, before)


async def test_an_ignored_signal_stays_ignored_and_gives_no_notice():
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        notice = ShutdownNotice()
        with given_on_stop_signals(notice):
            signal.raise_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)  # nothing must happen: time for the event loop to give a notice, were one due
            assert not notice.given
    finally:
        signal.signal(signal.SIGTERM, before)


async def test_a_handler_put_in_place_meanwhile_is_left_alone():
    """A forced stop: uvicorn puts its handlers back before the lifespan ends; ours must not come back over them."""
    before = signal.getsignal(signal.SIGTERM)
    try:
        with given_on_stop_signals(ShutdownNotice()):

            def replacement(sig, frame):
                return None

            signal.signal(signal.SIGTERM, replacement)
        assert signal.getsignal(signal.SIGTERM) is replacement
    finally:
        signal.signal(signal.SIGTERM, before)
