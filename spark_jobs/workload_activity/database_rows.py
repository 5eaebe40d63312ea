"""The report's rows in the service's database: the policy versions read, the `workload_reports` rows of a date
replaced (in one transaction, so a rerun never duplicates and readers never see half a day). No Spark here: the
benchmark's DuckDB job (bench/_duckdb_job.py) reads and writes through the same functions without importing it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import delete, insert, select

from spark_jobs.common.database import as_utc, database, reflected
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo


def read_policy_versions(database_url: str) -> list[PolicyVersionInfo]:
    with database(database_url) as engine, engine.connect() as connection:
        versions = reflected(connection, "policy_versions")
        rows = connection.execute(select(versions.c.version, versions.c.installed_at, versions.c.definition)).all()
    return [PolicyVersionInfo(version, as_utc(installed_at), definition) for version, installed_at, definition in rows]


def table_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Report rows (by column) as table rows: `interval_start` comes as UTC wall time (timestamp_ntz)."""
    computed_at = datetime.now(UTC)
    return [{**row, "interval_start": row["interval_start"].replace(tzinfo=UTC), "computed_at": computed_at} for row in rows]


def replace_date(database_url: str, report_date: date, rows: Sequence[Mapping[str, Any]]) -> None:
    with database(database_url) as engine, engine.begin() as connection:
        table = reflected(connection, "workload_reports")
        connection.execute(delete(table).where(table.c.report_date == report_date))
        if rows:
            connection.execute(insert(table), table_rows(rows))
