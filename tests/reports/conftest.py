"""Workload report rows as the nightly Spark job writes them, stored in a real database through SQLAlchemy; and the
browser the dashboard's tests drive (Debian's headless Chromium, through Playwright's client), with the errors its
pages log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.reports.models import WorkloadReportRow
from spark_jobs.contract.goals import BUCKET_COUNT, WITHIN_GOAL_BUCKETS
from spark_jobs.contract.report import WHOLE_DAY_MINUTES
from spark_jobs.manager.goals import percentile_pi

DAY = date(2026, 11, 21)
INTERVAL_MINUTES = 15
# The example policy's ONLINE class: 90 % within 250 ms, importance 1.
ONLINE_GOAL = {"goal_type": "percentile", "goal_ms": 250, "goal_percentile": 90, "goal_velocity": None, "importance": 1}
BATCH_GOAL = {"goal_type": "average", "goal_ms": 2000, "goal_percentile": None, "goal_velocity": None, "importance": 3}


def spread(within: int, beyond: int) -> list[int]:
    """A 14-bucket distribution: `within` requests at 80 % of the goal, `beyond` at 200 %."""
    buckets = [0] * BUCKET_COUNT
    buckets[3] += within
    buckets[11] += beyond
    return buckets


def report_row(
    slot: int | None,
    *,
    day: date = DAY,
    service_class: str = "ONLINE",
    period: int = 1,
    application_environment: str = "PAYROLL",
    node: str = "LOCAL",
    report_class: str = "",
    policy_version: int = 1,
    buckets: Sequence[int] = (0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0),
    **columns: Any,
) -> WorkloadReportRow:
    """One report row of `slot`, the index of a 15-minute interval in the day, or the whole-day row (slot None).
    The figures follow from `buckets` as the job computes them for the percentile goal (ONLINE's by default)."""
    ended = sum(buckets)
    goal = ONLINE_GOAL if service_class == "ONLINE" else BATCH_GOAL
    figures: dict[str, Any] = {
        **goal,
        "ended_count": ended,
        "failed_count": 0,
        "ended_per_s": ended / ((INTERVAL_MINUTES if slot is not None else WHOLE_DAY_MINUTES) * 60),
        "deleted_count": 0,
        "abandoned_count": 0,
        "response_avg_ms": 225.0 if ended else None,
        "response_stddev_ms": 30.0 if ended else None,
        "queue_avg_ms": 5.0 if ended else None,
        "queue_stddev_ms": 1.0 if ended else None,
        "execution_avg_ms": 220.0 if ended else None,
        "execution_stddev_ms": 29.0 if ended else None,
        "response_p50_ms": 200.0 if ended else None,
        "response_p90_ms": 200.0 if ended else None,
        "response_p99_ms": 500.0 if ended else None,
        "execution_velocity": 97.8 if ended else None,
        "performance_index": percentile_pi(buckets, 90) if goal is ONLINE_GOAL else (0.5 if ended else None),
        "goal_met_share": sum(buckets[:WITHIN_GOAL_BUCKETS]) / ended if ended else None,
        **columns,
    }
    midnight = datetime.combine(day, time(), tzinfo=UTC)
    return WorkloadReportRow(
        report_date=day,
        interval_start=midnight + timedelta(minutes=INTERVAL_MINUTES * (slot or 0)),
        interval_minutes=INTERVAL_MINUTES if slot is not None else WHOLE_DAY_MINUTES,
        application_environment=application_environment,
        node=node,
        service_class=service_class,
        period=period,
        report_class=report_class,
        policy_version=policy_version,
        buckets=list(buckets),
        **figures,
    )


async def store_rows(sessions: async_sessionmaker[AsyncSession], rows: Sequence[WorkloadReportRow]) -> None:
    async with sessions() as session, session.begin():
        session.add_all(rows)


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)"
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


def watch_errors(page: Page, expected: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The page's script errors and the errors it logs, as they come. The browser logs every fetch answered other
    than 2xx: `expected` are those a test causes on purpose, as (text in the message, text in its URL)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    def logged(message: ConsoleMessage) -> None:
        url = message.location.get("url", "")
        if message.type == "error" and not any(text in message.text and part in url for text, part in expected):
            errors.append(f"{message.text} ({url})")

    page.on("console", logged)
    return errors
