"""The job reads and writes the service's database through the tables as the database has them (no model of the
service's): what the service stores, the job reads; what the job writes, the service's model reads back."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from app.db import create_engine, session_factory
from app.policy.models import PolicyVersion
from app.reports.models import WorkloadReportRow
from spark_jobs.common.database import sync_database_url
from spark_jobs.workload_activity.database_rows import read_policy_versions, replace_date
from spark_jobs.workload_activity.figures import REPORT_COLUMNS
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo
from tests.reports.conftest import DAY, report_row

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    ("url", "blocking"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:////data/wlm.db", "sqlite:////data/wlm.db"),
        ("sqlite+aiosqlite:////data/wlm.db", "sqlite:////data/wlm.db"),
    ],
)
async def test_the_service_database_url_for_a_blocking_client(url: str, blocking: str) -> None:
    assert sync_database_url(url) == blocking


async def test_policy_versions_in_and_report_rows_out(database_url: str) -> None:
    engine = create_engine(database_url)
    sessions = session_factory(engine)
    try:
        installed = datetime(2026, 11, 20, 6, 30, 15, 250_000, tzinfo=UTC)
        definition = {"name": "P", "service_classes": [{"name": "FAST", "importance": 1, "goal": {"type": "velocity", "velocity": 9}}]}
        policy = PolicyVersion(version=3, name="P", digest="d", definition=definition, source="", installed_by="a", installed_at=installed)
        async with sessions() as session, session.begin():
            session.add(policy)
        [version] = await asyncio.to_thread(read_policy_versions, database_url)
        assert version == PolicyVersionInfo(3, installed, definition)
        assert version.installed_at.utcoffset() is not None

        expected = [report_row(slot) for slot in (None, 0, 5)]
        # As the job collects them (Arrow's rows): interval_start in UTC wall time (timestamp_ntz).
        collected = [
            {column: getattr(row, column) for column in REPORT_COLUMNS} | {"interval_start": row.interval_start.replace(tzinfo=None)}
            for row in expected
        ]
        for _rerun in range(2):
            await asyncio.to_thread(replace_date, database_url, DAY, collected)
            in_order = select(WorkloadReportRow).order_by(WorkloadReportRow.interval_minutes.desc(), WorkloadReportRow.interval_start)
            async with sessions() as session:
                stored = (await session.scalars(in_order)).all()
            assert [{column: getattr(row, column) for column in REPORT_COLUMNS} for row in stored] == [
                {column: getattr(row, column) for column in REPORT_COLUMNS} for row in expected
            ]
            assert all(row.computed_at.utcoffset() is not None for row in stored)
        await asyncio.to_thread(replace_date, database_url, DAY, [])
        async with sessions() as session:
            assert (await session.scalars(select(WorkloadReportRow))).all() == []
    finally:
        await engine.dispose()
