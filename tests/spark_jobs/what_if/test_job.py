"""The what-if job on the shared Spark session, on small in-code records: copies dropped by token and life, the day's
records only, one Spark task per environment. (A whole run stops its session: tests/cli/test_whatif.py runs it as
operators do, `wlm whatif`, from files and a database to its JSON result.)"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.what_if import job
from spark_jobs.what_if.extract import WHAT_IF_TYPES, DayRecords, replay_rows
from spark_jobs.what_if.model import ManagerSettings
from spark_jobs.what_if.replay import ReplayInputs
from tests.spark_jobs.what_if.records import DAY, MIDNIGHT, RECORDED, as_stored, record


def frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    schema = ", ".join(f"{name} {kind}" for name, kind in WHAT_IF_TYPES.items())
    return spark.createDataFrame([tuple(row.get(name) for name in WHAT_IF_TYPES) for row in rows], schema)


def day_records() -> list[dict[str, Any]]:
    payroll = [as_stored(record("ONLINE", 10.0 * i, 100), f"P~{i}") for i in range(30)]
    copies = payroll[:5]  # a batch written twice
    retried = [as_stored(record("BATCH", 900.0, 500, userid="CLERK"), "P~0", life=2)]  # P~0 lived again
    other = [as_stored(record("BATCH", 60.0 * i, 1000, userid="CLERK"), f"O~{i}", environment="OTHER") for i in range(4)]
    yesterday = as_stored(record("ONLINE", 5.0), "P~old") | {"ended_at": MIDNIGHT - timedelta(seconds=1)}
    return payroll + copies + retried + other + [yesterday]


def test_the_day_s_requests_once_each_environment_in_a_task_of_its_own(spark: SparkSession) -> None:
    rows = replay_rows(DayRecords(frame(spark, day_records()), None), DAY)
    assert rows.count() == 30 + 1 + 4
    inputs = ReplayInputs(RECORDED, {1: RECORDED}, MIDNIGHT, ManagerSettings(), (), 0)
    names = job.environment_names(DayRecords(None, None), rows)
    assert names == ["OTHER", "PAYROLL"]
    results = job.replay_all(rows, names, inputs, {"PAYROLL": 2})
    assert [(r["application_environment"], r["arrivals"], r["worker_tasks"]) for r in results] == [("OTHER", 4, 1), ("PAYROLL", 31, 2)]
    assert not results[0]["defined_by_candidate"] and results[1]["defined_by_candidate"]
    # The same inputs, the same result; one environment asked for gives that environment's alone, alike.
    again = job.replay_all(rows, names, inputs, {"PAYROLL": 2})
    assert json.dumps(again) == json.dumps(results)
    payroll_rows = replay_rows(DayRecords(frame(spark, day_records()), None), DAY, "PAYROLL")
    [payroll] = job.replay_all(payroll_rows, ["PAYROLL"], inputs, {"PAYROLL": 2})
    assert json.dumps(payroll) == json.dumps(results[1])


def test_copies_are_dropped_among_the_searched_files_and_copy_free_rows_are_kept_as_they_are(spark: SparkSession) -> None:
    records = day_records()
    copies, rest = records[:35], records[35:]  # PAYROLL with its copies; the retried life, OTHER and yesterday's
    rows = replay_rows(DayRecords(frame(spark, copies), frame(spark, rest)), DAY)
    assert rows.count() == 30 + 1 + 4
    everything = replay_rows(DayRecords(frame(spark, records), None), DAY)
    assert sorted(map(tuple, rows.collect())) == sorted(map(tuple, everything.collect()))
    # Copy-free rows are not searched: a copy among them (none is, as the service writes them) would stay.
    assert replay_rows(DayRecords(None, frame(spark, records)), DAY).count() == 30 + 5 + 1 + 4


def test_the_environments_are_the_ones_the_files_declare_where_they_declare_them(spark: SparkSession) -> None:
    rows = replay_rows(DayRecords(frame(spark, day_records()), None), DAY)
    declared = DayRecords(None, None, ["OTHER", "PAYROLL", "QUIET"])
    assert job.environment_names(declared, rows) == ["OTHER", "PAYROLL", "QUIET"]
    assert job.environment_names(declared, rows, "PAYROLL") == ["PAYROLL"]
    # A declared environment without records of the day is a task without rows: no result of its own.
    inputs = ReplayInputs(RECORDED, {1: RECORDED}, MIDNIGHT, ManagerSettings(), (), 0)
    results = job.replay_all(rows, ["OTHER", "PAYROLL", "QUIET"], inputs, {})
    assert [result["application_environment"] for result in results] == ["OTHER", "PAYROLL"]


def test_each_environment_is_one_partition_in_the_order_of_its_inserts(spark: SparkSession) -> None:
    rows = replay_rows(DayRecords(frame(spark, day_records()), None), DAY)
    names = ["OTHER", "PAYROLL", "THIRD", "FOURTH", "FIFTH"]  # more partitions than environments with rows

    def environments_of(partition: Any) -> Any:
        partition = list(partition)
        yield sorted({row.application_environment for row in partition}), [row.inserted_ms for row in partition]

    seen = job.by_environment(rows, names).rdd.mapPartitions(environments_of).collect()
    assert [environments for environments, _ in seen] == [["OTHER"], ["PAYROLL"], [], [], []]
    assert all(inserts == sorted(inserts) for _, inserts in seen)
    keys = job.partition_keys(spark, 7)
    assert len(set(keys)) == 7
