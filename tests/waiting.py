"""Waiting for a condition with a deadline, never for a fixed time: tests share two cores with everything else, so how
long something takes says little, and a test waits for what it needs to see, failing with what it saw last."""

from __future__ import annotations

import asyncio
import inspect
import reprlib
import time
from collections.abc import Callable
from typing import Any

Description = str | Callable[[], str]


def _failure(timeout: float, what: Description, last: Any) -> AssertionError:
    said = what() if callable(what) else what
    return AssertionError(f"not within {timeout:g} s: {said} (last seen: {reprlib.repr(last)})")


async def eventually(check: Callable[[], Any], timeout: float = 5.0, *, what: Description = "the condition", interval: float = 0.05) -> Any:
    """The first true result of `check` (a function or coroutine function), polled every `interval` seconds until
    `timeout`; an assertion inside `check` fails at once. `what` (or a function giving it, for a log read at the end)
    names the condition in the failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise _failure(timeout, what, result)
        await asyncio.sleep(interval)


def eventually_sync(check: Callable[[], Any], timeout: float = 5.0, *, what: Description = "the condition", interval: float = 0.1) -> Any:
    """`eventually` for code without an event loop (starting and stopping processes)."""
    deadline = time.monotonic() + timeout
    while True:
        if result := check():
            return result
        if time.monotonic() > deadline:
            raise _failure(timeout, what, result)
        time.sleep(interval)
