"""The job's decisions on their own: a report whose groups the files' footers did not all declare is named again
with the groups found in the records, so no row goes out without its names; the collected report is written to
Parquet with the report's schema, by Arrow or by Spark's writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import TimestampNTZType

from spark_jobs.workload_activity.extract import RECORDS_SCHEMA
from spark_jobs.workload_activity.figures import REPORT_SCHEMA
from spark_jobs.workload_activity.job import collect_report
from spark_jobs.workload_activity.load import SUCCESS_MARK, write_parquet
from spark_jobs.workload_activity.policy_goals import activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds
from tests.spark_jobs.workload_activity.test_transform import DAY, V1, group_keys, record

RECORDS = [record("FAST", 100), record("PCT", 80), record("PCT", 120)]
REPORT_SPARK_SCHEMA = from_arrow_schema(REPORT_SCHEMA, prefer_timestamp_ntz=True)


def _in_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: (row["interval_minutes"], row["interval_start"], row["service_class"] or ""))


def test_a_group_no_file_declared_is_named_from_the_records(spark: SparkSession) -> None:
    frame = spark.createDataFrame(RECORDS, RECORDS_SCHEMA)
    goals, steps = goal_rows([V1]), activation_steps([V1], *day_bounds(DAY))
    messages: list[str] = []

    def report_of(declared: list) -> list[dict[str, Any]]:
        table = collect_report(frame, goals, steps, DAY, 15, declared, None, messages.append)
        assert table.schema == REPORT_SCHEMA
        return _in_order(table.to_pylist())

    complete = report_of(group_keys(RECORDS))
    assert messages == []
    assert report_of(group_keys(RECORDS[:1])) == complete
    assert messages == ["a group no file declared: reading the records again to name the groups"]
    assert {(row["service_class"], row["ended_count"]) for row in complete if row["interval_minutes"] == 1440} == {("FAST", 1), ("PCT", 2)}


@pytest.mark.parametrize("as_uri", [False, True], ids=["path, by Arrow", "URI, by Spark's writer"])
def test_the_collected_report_is_written_with_the_reports_schema_and_rows(spark: SparkSession, tmp_path: Path, as_uri: bool) -> None:
    """Written as a rerun finds it: after Spark's writer (its part, `_SUCCESS` and their checksums) and a write that
    died (its hidden part), the second write replaces all of it, and Spark reads back the report's schema and rows."""
    frame = spark.createDataFrame(RECORDS, RECORDS_SCHEMA)
    goals, steps = goal_rows([V1]), activation_steps([V1], *day_bounds(DAY))
    table = collect_report(frame, goals, steps, DAY, 15, group_keys(RECORDS), None, lambda _: None)
    output = tmp_path.as_uri() if as_uri else str(tmp_path)
    directory = tmp_path / f"date={DAY.isoformat()}"

    write_parquet(spark, table.slice(0, 1), tmp_path.as_uri(), DAY)
    assert [name for name in os.listdir(directory) if name.endswith(".crc")]
    (directory / ".part-00000-died.snappy.parquet.tmp").write_bytes(b"half")
    path = write_parquet(spark, table, output, DAY)

    assert path == f"{output}/date={DAY.isoformat()}"
    written = spark.read.parquet(path)
    # (Spark reads every Parquet column as nullable.) The interval's start is a wall time without a zone.
    assert [(field.name, field.dataType) for field in written.schema] == [(field.name, field.dataType) for field in REPORT_SPARK_SCHEMA]
    assert written.schema["interval_start"].dataType == TimestampNTZType()
    assert sorted(map(tuple, written.collect()), key=repr) == sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)
    assert len(list(directory.glob("*.parquet"))) == 1
    assert (directory / SUCCESS_MARK).exists()
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]
    if not as_uri:
        assert sorted(name.endswith(".parquet") for name in os.listdir(directory)) == [False, True]
