"""The job's decisions on their own: a report whose groups the files' footers did not all declare is named again
with the groups found in the records, so no row goes out without its names; the collected report is written to
Parquet with the report's schema, by Arrow or by Spark's writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_jobs.workload_activity.extract import RECORDS_SCHEMA
from spark_jobs.workload_activity.figures import REPORT_SCHEMA
from spark_jobs.workload_activity.job import collect_report
from spark_jobs.workload_activity.load import SUCCESS_MARK, write_parquet
from spark_jobs.workload_activity.policy_goals import activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds
from tests.spark_jobs.workload_activity.test_transform import DAY, V1, group_keys, record

RECORDS = [record("FAST", 100), record("PCT", 80), record("PCT", 120)]
# The report's columns as Spark computed them before the driver made its rows (figures.py): a reader sees the same.
SPARK_COLUMNS = (
    "report_date:date,interval_start:timestamp_ntz,interval_minutes:int,application_environment:string,node:string,"
    "service_class:string,period:int,report_class:string,policy_version:int,goal_type:string,goal_ms:bigint,"
    "goal_percentile:int,goal_velocity:int,importance:int,ended_count:bigint,failed_count:bigint,ended_per_s:double,"
    "deleted_count:bigint,abandoned_count:bigint,response_avg_ms:double,response_stddev_ms:double,queue_avg_ms:double,"
    "queue_stddev_ms:double,execution_avg_ms:double,execution_stddev_ms:double,response_p50_ms:double,"
    "response_p90_ms:double,response_p99_ms:double,buckets:array<bigint>,execution_velocity:double,"
    "performance_index:double,goal_met_share:double,delay_samples:bigint,using_pct:double,"
    "delay_environment_state_pct:double,delay_redelivery_pct:double,delay_group_cap_pct:double,"
    "delay_no_server_pct:double,delay_servers_starting_pct:double,delay_busy_higher_pct:double,"
    "delay_busy_lower_pct:double,unknown_pct:double"
)


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
    # The interval's start is a wall time without a zone.
    assert written.schema.simpleString() == f"struct<{SPARK_COLUMNS}>"
    assert sorted(map(tuple, written.collect()), key=repr) == sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)
    assert len(list(directory.glob("*.parquet"))) == 1
    assert (directory / SUCCESS_MARK).exists()
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]
    if not as_uri:
        assert sorted(name.endswith(".parquet") for name in os.listdir(directory)) == [False, True]
