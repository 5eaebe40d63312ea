"""Reading what the report needs: a day of work records (Parquet, any URI Spark reads) and the policy versions."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from sqlalchemy import create_engine, select

from app.db import sync_database_url
from app.policy.models import PolicyVersion
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo

# The columns the report reads, in Spark's types (docs/work-records.md has them all). Given explicitly, so a day
# without records reads as an empty table instead of failing to infer a schema.
RECORDS_SCHEMA = (
    "token STRING, application_environment STRING, node STRING, service_class STRING, period INT, "
    "report_class STRING, policy_version INT, outcome STRING, ended_at TIMESTAMP, response_time_ms BIGINT, "
    "queue_time_ms BIGINT, execution_time_ms BIGINT"
)


def day_path(records_uri: str, report_date: date) -> str:
    return f"{records_uri.rstrip('/')}/date={report_date.isoformat()}"


def read_records(spark: SparkSession, records_uri: str, report_date: date) -> DataFrame:
    """The records of `report_date` (its partition), or an empty table when the day has none."""
    path = day_path(records_uri, report_date)
    if urlparse(path).scheme in ("", "file") and not Path(urlparse(path).path).is_dir():
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
