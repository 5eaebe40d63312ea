"""What `wlm demo`'s summary tells of goal attainment: per class, the share of the demo's 10 s intervals in which it
met its goal, and when it missed (app/examples/attainment.py), from the work records of the demo's own requests.

The records are read where the service writes them (`<data dir>/records`, as the demo finds data/admin.key): the
demo's requests are those of its queue manager connection. A class is judged by its first period's goal, on the
requests that ended in that period (BATCH's second period is discretionary: no goal to miss). Left out: the first
SETTLING_SECONDS (the first servers start, the manager's first window fills) and the QUIESCE until its backlog was
served (from the QUIESCE to the last end of the requests queued before the RESUME): there the operator, not the
manager, keeps the servers away. The intervals run from the demo's start to its last arrival.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from pydantic import TypeAdapter

from app.examples.attainment import ClassAttainment, goal_judge, judged_attainment
from app.examples.demo_plan import DEMO_POLICY
from app.examples.demo_report import clock
from app.policy.schemas import Goal
from app.work import records

INTERVAL_SECONDS = 10.0
SETTLING_SECONDS = 30.0
# The service flushes its records every second (WLM_RECORDS_FLUSH_SECONDS): the last ones are waited for this long.
RECORDS_WITHIN_SECONDS = 15.0

Request = tuple[str, float, float, float]  # (class, inserted, selected, ended), epoch seconds


def first_period_goals(policy: dict[str, Any] = DEMO_POLICY) -> dict[str, Any]:
    """Each class's goal, of its first period where it has periods."""
    adapter: TypeAdapter[Any] = TypeAdapter(Goal)
    return {c["name"]: adapter.validate_python(c["goal"] if "goal" in c else c["periods"][0]["goal"]) for c in policy["service_classes"]}


def requests_of(rows: Sequence[dict[str, Any]], queue_manager_id: int) -> list[Request]:
    """The demo's requests of their first period, from work records (as dicts, times as datetimes)."""
    ours = [row for row in rows if row["queue_manager_id"] == queue_manager_id and row["period"] == 1]
    return [
        (
            row["service_class"],
            row["inserted_at"].timestamp(),
            (row["selected_at"] or row["ended_at"]).timestamp(),
            row["ended_at"].timestamp(),
        )
        for row in ours
    ]


@dataclass(frozen=True)
class DemoAttainment:
    """Each class's counted intervals (offsets in seconds since the demo began), and the span left out for the
    QUIESCE (seconds since the demo began; None: there was none)."""

    classes: dict[str, ClassAttainment]
    left_out: tuple[float, float] | None

    def lines(self) -> list[str]:
        span = ""
        if self.left_out is not None:
            span = f" and {clock(self.left_out[0])}-{clock(self.left_out[1])}, the QUIESCE until its backlog was served,"
        lines = [
            f"  attainment: the share of {INTERVAL_SECONDS:g} s intervals whose PI (of the requests ended in it; none ended "
            f"while some waited: a miss) is <= 1; the first {SETTLING_SECONDS:g} s{span} left out"
        ]
        for name, found in self.classes.items():
            missed = [clock(i.offset_s) for i in found.intervals if i.pi is not None and i.pi > 1]
            share = "-" if found.share is None else f"{found.share:.2f}"
            when = f"; missed at {', '.join(missed)}" if missed else ""
            lines.append(f"    {name:<8} {share} ({found.met} of {found.counted} intervals{when})")
        return lines


def attainment(
    requests: Sequence[Request], began: float, duration_s: float, quiesce_at: datetime | None, resume_at: datetime | None
) -> DemoAttainment:
    """The demo's attainment from its requests; `began` the epoch second its arrivals began."""
    judges = {name: goal_judge(goal) for name, goal in first_period_goals().items()}
    found = judged_attainment(requests, judges, began, began + duration_s, INTERVAL_SECONDS)
    left_out = None
    if quiesce_at is not None:
        resumed = resume_at.timestamp() if resume_at is not None else math.inf
        served = max([ended for _, inserted, _, ended in requests if inserted < resumed] + [min(resumed, began + duration_s)])
        left_out = (quiesce_at.timestamp() - began, served - began)

    def kept(offset: float) -> bool:
        if offset < SETTLING_SECONDS:
            return False
        return left_out is None or offset + INTERVAL_SECONDS <= left_out[0] or offset >= left_out[1]

    return DemoAttainment({name: ClassAttainment(tuple(i for i in c.intervals if kept(i.offset_s))) for name, c in found.items()}, left_out)


async def read_requests(records_dir: Path, queue_manager_id: int, expected: int) -> list[Request] | None:
    """The demo's requests from the records, once `expected` of its records are there (or RECORDS_WITHIN_SECONDS
    passed); None without a records directory (the service runs elsewhere)."""
    if not records_dir.is_dir():
        return None
    deadline = time.monotonic() + RECORDS_WITHIN_SECONDS
    while True:
        table = await asyncio.to_thread(records.read, records_dir)
        rows = table.filter(pc.equal(table["queue_manager_id"], queue_manager_id)).to_pylist()
        if len(rows) >= expected or time.monotonic() > deadline:
            return requests_of(rows, queue_manager_id)
        await asyncio.sleep(0.5)
