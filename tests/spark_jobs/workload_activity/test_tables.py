"""The small tables made on the driver hold the values as given: names are literals of their own, never SQL."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_jobs.workload_activity.policy_goals import GoalRow
from spark_jobs.workload_activity.tables import GROUP, goal_table, group_table

# A quote, a backslash, an escape sequence, SQL and characters outside ASCII.
AWKWARD = "O'Brien \\' \\u0041 \\n'; DROP TABLE x; -- ünï 漢"


def test_a_group_table_holds_its_names_as_given_and_ids_as_the_records_hash_them(spark: SparkSession) -> None:
    group = (AWKWARD, "node\\1", "C'LASS", 2, "", 7, "velocity", None, None, 40, 3)
    [row] = group_table(spark, [group]).collect()
    assert tuple(row[column] for column in GROUP) == group
    hashed = spark.createDataFrame(
        [group[:6]],
        "application_environment STRING, node STRING, service_class STRING, period INT, report_class STRING, policy_version INT",
    )
    assert (
        row.group_id
        == hashed.selectExpr("xxhash64(application_environment, node, service_class, period, report_class, policy_version)").first()[0]
    )


def test_a_goal_table_holds_its_goals_as_given(spark: SparkSession) -> None:
    goals = [GoalRow(1, AWKWARD, 1, "percentile", 2**40, 90, None, 1), GoalRow(2, "B", 3, "discretionary", None, None, None, None)]
    assert [GoalRow(*row) for row in goal_table(spark, goals).collect()] == goals
