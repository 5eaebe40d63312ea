"""Reading what the report needs: a day of work records (Parquet, any URI Spark reads) and the policy versions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from datetime import date
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSystem
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from sqlalchemy import create_engine, select

from app.db import sync_database_url
from app.policy.models import PolicyVersion
from app.work.records import GROUP_KEYS, GROUP_KEYS_FOOTER
from spark_jobs.workload_activity.policy_goals import GoalRow, PolicyVersionInfo

# The columns the report reads, in Spark's types (docs/work-records.md has them all). Given explicitly, so a day
# without records reads as an empty table instead of failing to infer a schema.
RECORD_TYPES = {
    "token": "STRING",
    "application_environment": "STRING",
    "node": "STRING",
    "service_class": "STRING",
    "period": "INT",
    "report_class": "STRING",
    "policy_version": "INT",
    "outcome": "STRING",
    "ended_at": "TIMESTAMP",
    "response_time_ms": "BIGINT",
    "queue_time_ms": "BIGINT",
    "execution_time_ms": "BIGINT",
}


def _schema(types: dict[str, str]) -> str:
    return ", ".join(f"{name} {spark_type}" for name, spark_type in types.items())


RECORDS_SCHEMA = _schema(RECORD_TYPES)
# A group key, and the footers' JSON list of them (app.work.records.write_file), as Spark reads them.
GROUP_KEYS_SCHEMA = _schema({column: RECORD_TYPES[column] for column in GROUP_KEYS})
DECLARED_KEYS_SCHEMA = f"ARRAY<STRUCT<{GROUP_KEYS_SCHEMA}>>"
# Footers are read a few at a time: from a remote store each read is a round trip.
FOOTER_READERS = 8

# GoalRow's fields in Spark's types.
GOAL_TYPES = {
    "policy_version": "INT",
    "service_class": "STRING",
    "period": "INT",
    "goal_type": "STRING",
    "goal_ms": "BIGINT",
    "goal_percentile": "INT",
    "goal_velocity": "INT",
    "importance": "INT",
}
GOAL_SCHEMA = _schema(GOAL_TYPES)


def goal_table(spark: SparkSession, goals: Sequence[GoalRow]) -> DataFrame:
    """`goals` as a table the driver holds (an inline table of bound parameters): joining it starts no Spark job,
    where a DataFrame made of Python rows costs one, and a second of a short run."""
    if not goals:
        return spark.createDataFrame([], GOAL_SCHEMA)
    names = [field.name for field in fields(GoalRow)]
    assert names == list(GOAL_TYPES), "GOAL_TYPES must follow GoalRow"
    rows = ", ".join(
        "(" + ", ".join(f"CAST(:{name}_{index} AS {GOAL_TYPES[name]})" for name in names) + ")" for index in range(len(goals))
    )
    values = {f"{name}_{index}": value for index, goal in enumerate(goals) for name, value in asdict(goal).items()}
    return spark.sql(f"SELECT * FROM VALUES {rows} AS goals({', '.join(names)})", args=values)


def day_path(records_uri: str, report_date: date) -> str:
    return f"{records_uri.rstrip('/')}/date={report_date.isoformat()}"


def day_has_files(records_uri: str, report_date: date) -> bool:
    """False when the day's partition is a local directory that does not exist (elsewhere: Spark will tell)."""
    path = day_path(records_uri, report_date)
    return urlparse(path).scheme not in ("", "file") or Path(urlparse(path).path).is_dir()


def read_records(spark: SparkSession, records_uri: str, report_date: date) -> DataFrame:
    """The records of `report_date` (its partition), or an empty table when the day has none."""
    path = day_path(records_uri, report_date)
    if not day_has_files(records_uri, report_date):
        return spark.createDataFrame([], RECORDS_SCHEMA)
    try:
        return spark.read.schema(RECORDS_SCHEMA).parquet(path)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc):
            return spark.createDataFrame([], RECORDS_SCHEMA)
        raise


def read_policy_versions(database_url: str) -> list[PolicyVersionInfo]:
    engine = create_engine(sync_database_url(database_url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(select(PolicyVersion.version, PolicyVersion.installed_at, PolicyVersion.definition)).all()
    finally:
        engine.dispose()
    return [PolicyVersionInfo(version, installed_at, definition) for version, installed_at, definition in rows]


def declared_group_keys(spark: SparkSession, records: DataFrame) -> DataFrame | None:
    """The group keys (GROUP_KEYS) the files of `records` declare in their footers, distinct; None when a file
    declares none or its footer cannot be read from here (a file system pyarrow does not know, such as s3a://):
    the report then finds its groups by reading the records a second time."""
    with ThreadPoolExecutor(FOOTER_READERS) as pool:
        declared = list(pool.map(footer_group_keys, records.inputFiles()))
    if any(keys is None for keys in declared):
        return None
    distinct = {json.dumps(key, sort_keys=True) for keys in declared for key in keys}  # type: ignore[union-attr]
    return spark.sql(f"SELECT inline(from_json(:keys, '{DECLARED_KEYS_SCHEMA}'))", args={"keys": f"[{','.join(distinct)}]"})


def footer_group_keys(uri: str) -> list[dict[str, object]] | None:
    """The group keys the file at `uri` declares, or None."""
    try:
        filesystem, path = FileSystem.from_uri(uri)
        footer = pq.read_metadata(path, filesystem=filesystem).metadata or {}
    except (OSError, pa.ArrowException):
        return None
    declared = footer.get(GROUP_KEYS_FOOTER)
    return None if declared is None else json.loads(declared)
