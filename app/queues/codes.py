"""The Lua scripts' return codes, defined here once: every script is loaded behind a prelude that gives each code
its name (`local UNKNOWN_WORK = -1`), and app/errors.py maps each to the error a client is answered."""

from __future__ import annotations

from enum import IntEnum

from spark_jobs.contract.goals import TOLERANT_BUCKET_LIMITS_PCT


class ReturnCode(IntEnum):
    """The first value a script returns (or, for each end of a batch, the code before its value)."""

    OK = 0
    # Unknown, or another queue manager's (not revealed to a queue manager that does not own it).
    UNKNOWN_WORK = -1
    SERVER_NOT_REGISTERED = -2
    WORKER_TASKS_EXHAUSTED = -3
    OVERFLOW_NOT_NEEDED = -4
    ALREADY_ENDED = -5
    NOT_HOLDER = -6
    NOT_QUEUED = -8
    BACKLOG_LIMIT = -10
    SERVER_SURPLUS = -11
    FENCED = -12
    UNKNOWN_DEAD_LETTER = -17
    # The dead letter's queue is not the one its caller read (app/queues/dead_letters.py asks again).
    DEAD_LETTER_MOVED = -18
    # The slow queue sweeper's (app/sweeper): handled inside the queue store, never answered to a client.
    FRONT_SWEPT = -13
    BLOB_RESTORED = -14
    NOT_SWEPT = -15
    SWEEP_ABORTED = -16


def lua_prelude() -> str:
    """The codes as Lua locals, prepended to every script, and the report buckets' limits (percent of the goal, with
    the report's tolerance: spark_jobs/contract/goals.py) that the end scripts count requests in."""
    codes = "".join(f"local {code.name} = {code.value}\n" for code in ReturnCode)
    return codes + f"local BUCKET_LIMITS_PCT = {{{', '.join(repr(limit) for limit in TOLERANT_BUCKET_LIMITS_PCT)}}}\n"
