"""Recorded requests and policies for the what-if tests, as the records and the database hold them."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlalchemy import insert

from app.migrate import upgrade
from app.work.records import write_table
from spark_jobs.common.database import database, reflected
from spark_jobs.contract.records import SCHEMA

DAY = date(2026, 11, 20)
MIDNIGHT = datetime(2026, 11, 20, tzinfo=UTC)
MIDNIGHT_MS = int(MIDNIGHT.timestamp() * 1000)

# ONLINE (userid ATM*) must answer within 500 ms on average, BATCH within a minute; two to four servers.
RECORDED: dict[str, Any] = {
    "name": "RECORDED",
    "service_classes": [
        {"name": "ONLINE", "importance": 1, "goal": {"type": "average", "response_time_ms": 500}},
        {"name": "BATCH", "importance": 3, "goal": {"type": "average", "response_time_ms": 60_000}},
    ],
    "classification": [
        {
            "subsystem_type": "CB",
            "default_service_class": "BATCH",
            "rules": [{"qualifier": "UI", "value": "ATM*", "service_class": "ONLINE"}],
        }
    ],
    "application_environments": [
        {"name": "PAYROLL", "subsystem_type": "CB", "start_command": ["server"], "server_limits": {"min": 2, "max": 4}}
    ],
}


def candidate(**changes: Any) -> dict[str, Any]:
    """RECORDED with top-level fields replaced."""
    return copy.deepcopy(RECORDED) | changes


def with_limits(definition: dict[str, Any], **limits: int) -> dict[str, Any]:
    changed = copy.deepcopy(definition)
    changed["application_environments"][0]["server_limits"] = limits
    return changed


def record(
    service_class: str = "ONLINE",
    at_s: float = 0.0,
    execution_ms: int = 100,
    *,
    queue_ms: int = 0,
    userid: str = "ATM1",
    outcome: str = "completed",
    version: int = 1,
    period: int = 1,
    subsystem_type: str = "CB",
) -> dict[str, Any]:
    """A record as a replay task reads it (spark_jobs/what_if/replay.py REPLAY_COLUMNS)."""
    inserted = MIDNIGHT_MS + round(at_s * 1000)
    ended_by_server = outcome in ("completed", "failed")
    return {
        "service_class": service_class,
        "period": period,
        "policy_version": version,
        "subsystem_type": subsystem_type,
        "userid": userid,
        "subsystem_name": "BANK1",
        "dependent": False,
        "outcome": outcome,
        "promoted": False,
        "inserted_ms": inserted,
        "selected_ms": inserted + queue_ms if ended_by_server else None,
        "ended_ms": inserted + queue_ms + (execution_ms if ended_by_server else 0),
        "execution_time_ms": execution_ms if ended_by_server else None,
    }


def as_stored(fields: dict[str, Any], token: str, environment: str = "PAYROLL", life: int | None = 1) -> dict[str, Any]:
    """A `record` as the records' file holds it (timestamps, not milliseconds)."""

    def moment(ms: int | None) -> datetime | None:
        return None if ms is None else MIDNIGHT + timedelta(milliseconds=ms - MIDNIGHT_MS)

    stored = {key: value for key, value in fields.items() if not key.endswith("_ms")}
    return stored | {
        "token": token,
        "life": life,
        "application_environment": environment,
        "inserted_at": moment(fields["inserted_ms"]),
        "selected_at": moment(fields["selected_ms"]),
        "ended_at": moment(fields["ended_ms"]),
        "execution_time_ms": fields["execution_time_ms"],
    }


def write_day(root: Path, stored: list[dict[str, Any]]) -> None:
    """`stored` records (as_stored) in a records file under `root`, as the service writes them."""
    columns = {field.name: [row.get(field.name) for row in stored] for field in SCHEMA}
    columns["node"] = ["LOCAL"] * len(stored)
    write_table(root, pa.table(columns, schema=SCHEMA))


def database_with(data_dir: Path, *definitions: dict[str, Any]) -> str:
    """The service's SQLite database in `data_dir`, migrated, with `definitions` installed as versions 1, 2, ..."""
    url = f"sqlite:///{(data_dir / 'wlm.db').resolve()}"
    data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(url)
    with database(url) as engine, engine.begin() as connection:
        connection.execute(
            insert(reflected(connection, "policy_versions")),
            [
                {
                    "version": number,
                    "name": definition["name"],
                    "digest": str(number),
                    "definition": definition,
                    "source": "",
                    "installed_by": "admin",
                    "installed_at": MIDNIGHT - timedelta(days=10 - number),
                }
                for number, definition in enumerate(definitions, 1)
            ],
        )
    return url
