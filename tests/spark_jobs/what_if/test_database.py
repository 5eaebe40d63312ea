"""The job reads the servers' worker tasks from the service's connections as the database has them: per environment,
the most frequent of the server connections that were connected during the day (the records hold none)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from app.auth.models import Principal
from app.connections.models import Connection
from app.db import create_engine, session_factory
from spark_jobs.what_if.extract import read_worker_tasks
from tests.spark_jobs.what_if.records import DAY, MIDNIGHT

pytestmark = pytest.mark.asyncio
HOUR = timedelta(hours=1)


async def test_the_worker_tasks_of_the_day_s_servers(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with session_factory(engine)() as session, session.begin():
            principal = Principal(name="servers", roles=["server"], created_by="admin")
            session.add(principal)
            await session.flush()

            def server(n: int, environment: str, tasks: int, connected: timedelta, gone: timedelta | None) -> Connection:
                return Connection(
                    token_hash=f"t{n}",
                    principal_id=principal.id,
                    role="server",
                    subsystem_type="CB",
                    subsystem_name="S",
                    node="LOCAL",
                    application_environment=environment,
                    worker_tasks=tasks,
                    worker_weight=1,
                    connected_at=MIDNIGHT + connected,
                    disconnected_at=None if gone is None else MIDNIGHT + gone,
                )

            session.add_all(
                [
                    server(1, "PAYROLL", 4, -HOUR, 2 * HOUR),  # connected before the day, gone during it
                    server(2, "PAYROLL", 4, 3 * HOUR, None),  # still connected
                    server(3, "PAYROLL", 1, 5 * HOUR, 6 * HOUR),
                    server(4, "OTHER", 2, -2 * HOUR, -HOUR),  # gone before the day
                    server(5, "OTHER", 3, 25 * HOUR, None),  # connected after it
                    server(6, "BATCH", 8, 23 * HOUR, 26 * HOUR),
                ]
            )
        assert await asyncio.to_thread(read_worker_tasks, database_url, DAY) == {"PAYROLL": 4, "BATCH": 8}
    finally:
        await engine.dispose()
