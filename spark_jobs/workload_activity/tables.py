"""The report's small tables, made on the driver from plain values: the goals, the groups the records' files declare,
and empty tables. Each is an inline table of literals that Spark knows whole, so what is computed of it alone
(the groups' ids) is computed while the query is planned, and no Spark job reads it apart from the broadcast that
joins it. (A DataFrame of Python rows starts a job and a Python worker; the declared groups found distinct and given
their goals by Spark took a shuffle and two broadcasts: three jobs, and about 2 s of CPU time in every run.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, fields
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.contract.records import GROUP_KEYS
from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow

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
# A goal's own columns (the rest of GoalRow names the class period it is of).
GOAL_COLUMNS = ("goal_type", "goal_ms", "goal_percentile", "goal_velocity", "importance")
# A group's names (the records' columns, in their Spark types), and its goal: what a report row is of.
GROUP_TYPES = {
    "application_environment": "STRING",
    "node": "STRING",
    "service_class": "STRING",
    "period": "INT",
    "report_class": "STRING",
    "policy_version": "INT",
    **{column: GOAL_TYPES[column] for column in GOAL_COLUMNS},
}
GROUP = tuple(GROUP_TYPES)
# A group's id: a 64-bit hash of its names, which Spark takes alike of a record's columns and of a group table's.
GROUP_ID = f"xxhash64({', '.join(GROUP_KEYS)})"


def empty_table(spark: SparkSession, types: Mapping[str, str]) -> DataFrame:
    """A table of `types` without rows that Spark knows to be empty: it plans away what is computed from it, where
    a DataFrame of no Python rows starts a job and a Python worker (a second and a half, beside a day's read)."""
    return spark.sql(f"SELECT {', '.join(f'CAST(NULL AS {spark_type}) AS {name}' for name, spark_type in types.items())} WHERE false")


def _literal(value: Any) -> str:
    """`value` (None, an integer or a string) as SQL text: a string as the hex of its UTF-8 bytes, so no name from a
    policy or a footer is ever parsed as SQL."""
    if value is None:
        return "NULL"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return f"CAST(X'{value.encode().hex()}' AS STRING)"
    raise TypeError(f"no SQL literal for {type(value).__name__} {value!r}")


def _values(spark: SparkSession, types: Mapping[str, str], rows: Sequence[Sequence[Any]], select: str = "*") -> DataFrame:
    """`rows` (values in the order of `types`) as an inline table, `select` taken of it. The values are literals in
    the statement's text: as bound parameters, each took py4j calls of its own (1,200 of a run's 2,500 while
    planning)."""
    names = list(types)
    cells = ", ".join(
        "(" + ", ".join(f"CAST({_literal(value)} AS {types[name]})" for name, value in zip(names, row, strict=True)) + ")" for row in rows
    )
    return spark.sql(f"SELECT {select} FROM VALUES {cells} AS rows({', '.join(names)})")


def goal_table(spark: SparkSession, goals: Sequence[GoalRow]) -> DataFrame:
    """`goals` as a table with GoalRow's columns."""
    assert [field.name for field in fields(GoalRow)] == list(GOAL_TYPES), "GOAL_TYPES must follow GoalRow"
    return _values(spark, GOAL_TYPES, [astuple(goal) for goal in goals]) if goals else empty_table(spark, GOAL_TYPES)


def declared_groups(keys: Iterable[Mapping[str, Any]], steps: Sequence[ActivationStep], goals: Sequence[GoalRow]) -> list[tuple[Any, ...]]:
    """Every group (GROUP's values) that records of the declared `keys` (GROUP_KEYS with each record's own policy
    version, as files declare them) can fall in: with their own version, or any version active during the day, the
    report class "" for none, with that version's goal (a class period no version defines has no group). More groups
    than the records have do no harm: they are joined by id."""
    goal_of: dict[tuple[Any, ...], GoalRow] = {(goal.policy_version, goal.service_class, goal.period): goal for goal in goals}
    groups: dict[tuple[Any, ...], None] = {}
    for key in keys:
        place = (key.get("application_environment"), key.get("node"))
        for version in dict.fromkeys([key.get("policy_version"), *(step.version for step in steps)]):
            goal = goal_of.get((version, key.get("service_class"), key.get("period")))
            if goal is not None:
                names = (*place, goal.service_class, goal.period, key.get("report_class") or "", version)
                groups[(*names, *(getattr(goal, column) for column in GOAL_COLUMNS))] = None
    return list(groups)


def group_table(spark: SparkSession, groups: Sequence[Sequence[Any]]) -> DataFrame:
    """`groups` (GROUP's values, as `declared_groups` gives them) by `group_id`."""
    if not groups:
        return empty_table(spark, {"group_id": "BIGINT", **GROUP_TYPES})
    return _values(spark, GROUP_TYPES, groups, select=f"{GROUP_ID} AS group_id, *")
