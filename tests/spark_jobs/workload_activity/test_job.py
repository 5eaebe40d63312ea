"""The job's one decision on its own: a report whose groups the files' footers did not all declare is computed
again with the groups found in the records, so no row goes out without its names."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_jobs.workload_activity.extract import RECORDS_SCHEMA
from spark_jobs.workload_activity.job import collect_report
from spark_jobs.workload_activity.policy_goals import activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds
from tests.spark_jobs.workload_activity.test_transform import DAY, V1, group_keys, record


def test_a_group_no_file_declared_is_named_from_the_records(spark: SparkSession) -> None:
    records = [record("FAST", 100), record("PCT", 80), record("PCT", 120)]
    frame = spark.createDataFrame(records, RECORDS_SCHEMA)
    goals, steps = goal_rows([V1]), activation_steps([V1], *day_bounds(DAY))
    messages: list[str] = []

    def report_of(declared: list) -> list:
        report, rows = collect_report(frame, goals, steps, DAY, 15, declared, None, messages.append)
        assert report.is_cached
        return sorted(rows)

    complete = report_of(group_keys(records))
    assert messages == []
    assert report_of(group_keys(records[:1])) == complete
    assert messages == ["a group no file declared: reading the records again to name the groups"]
    assert {(row.service_class, row.ended_count) for row in complete if row.interval_minutes == 1440} == {("FAST", 1), ("PCT", 2)}
