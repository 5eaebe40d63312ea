"""The notice that this process is stopping, given the moment SIGTERM or SIGINT arrives.

uvicorn, told to stop, closes its listening sockets and then waits for every open request to finish before the
application's shutdown runs. A long-polling select would hold that up for its whole wait (a minute), an event
stream for ever, and a rolling restart with it. So the lifespan chains a handler in front of uvicorn's: on the
signal the notice is given, waiting selects answer with what they have (nothing: 204) and event streams end, and
servers and dashboards come back to another replica or to the restarted one. Nothing accepted is touched: work is
taken only by the atomic select script, and a select that took some answers with it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CANCEL_GRACE_SECONDS = 0.5


class ShutdownNotice:
    def __init__(self) -> None:
        self._given = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def given(self) -> bool:
        return self._given.is_set()

    def on_notice(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def give(self) -> None:
        if self.given:
            return
        self._given.set()
        for callback in self._callbacks:
            callback()

    async def unless_given(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """(True, its result) once `awaitable` finishes, or (False, None) with it cancelled if the notice comes
        first; for reads only, whose result may be dropped. Cancelled itself (a client that went away), it cancels
        `awaitable` too."""
        work = asyncio.ensure_future(awaitable)
        notice = asyncio.ensure_future(self._given.wait())
        try:
            await asyncio.wait((work, notice), return_when=asyncio.FIRST_COMPLETED)
        finally:
            notice.cancel()
            interrupted = not work.done()
            if interrupted:
                work.cancel()
                await asyncio.wait((work,), timeout=CANCEL_GRACE_SECONDS)
                # redis-py can swallow a cancellation that arrives while a command is being sent, and go on
                # blocking for the command's whole timeout; the stop must not wait for it.
                work.add_done_callback(_retrieve)
        if interrupted:
            return False, None
        return True, work.result()


def _retrieve(future: asyncio.Future[T]) -> None:
    """Read a dropped read's outcome, so that its exception is not reported as never retrieved."""
    if not future.cancelled():
        future.exception()


@contextmanager
def given_on_stop_signals(notice: ShutdownNotice) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT give `notice` and then do what they did before (uvicorn's handler, which
    starts its graceful shutdown); a signal that was ignored stays ignored, and gives no notice. Only the main
    thread may set signal handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handle(sig: int, frame: FrameType | None) -> None:
        chained = previous[signal.Signals(sig)]
        if chained in (signal.SIG_IGN, None):
            return
        loop.call_soon_threadsafe(notice.give)
        if callable(chained):
            chained(sig, frame)
        elif chained == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # Only where ours is still in place: a forced stop has uvicorn put back its own first.
            if signal.getsignal(sig) is handle:
                signal.signal(sig, handler)
