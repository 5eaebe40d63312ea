"""Where a hot-path request's time goes, for the benchmarks (bench/lifecycle.py's latency phase): with
WLM_TIMING_HEADER on, each answer of the hot paths carries the wall-clock times (epoch seconds) of its phases in
an `X-WLM-Timing` header, after `pid=` the answering process's id, `name=seconds` pairs in the order they happened:

    recv          the hot path has the request (its head parsed by uvicorn)
    script_call   the lifecycle script's call is sent to Redis (an insert's, a select's: each attempt of a long
                  poll marks again)
    script_reply  its reply is in
    woken         a long-polling select's waiter was woken (its process heard the insert's wake-up)
    resumed       the waiting select runs again
    respond       the answer is about to be written

Wall-clock times, so a client on the same host can line up one request's insert and select, served by different
processes. Off by default: then no request has a list of marks, and `mark` is one context variable read.
"""

from __future__ import annotations

import os
import time
from contextvars import ContextVar

HEADER = "x-wlm-timing"

_marks: ContextVar[list[tuple[str, float]] | None] = ContextVar("wlm_timing_marks", default=None)


def start() -> list[tuple[str, float]]:
    """This request's marks, from now on (its task's context): the first is `recv`."""
    marks = [("recv", time.time())]
    _marks.set(marks)
    return marks


def mark(name: str, at: float | None = None) -> None:
    """Marks `name` now (or `at`) in the current request's timing, if it is timed."""
    marks = _marks.get()
    if marks is not None:
        marks.append((name, time.time() if at is None else at))


def header(marks: list[tuple[str, float]]) -> tuple[bytes, bytes]:
    """The marks as a response header, after the process's id (how the workers share the load) and with `respond`
    (now) last."""
    marks.append(("respond", time.time()))
    return HEADER.encode(), ",".join([f"pid={os.getpid()}", *(f"{name}={at:.6f}" for name, at in marks)]).encode()
