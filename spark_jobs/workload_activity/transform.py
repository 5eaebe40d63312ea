"""The workload activity report's Spark side as pure functions of DataFrames (no session, no I/O): the records summed
into cells, and the groups that name them; figures.py makes the report's rows of the collected cells.

The figures follow the service's live goal evaluation (spark_jobs/manager/goals.py), by the buckets and fixed points both
take from spark_jobs/contract/goals.py, so the nightly report and the live performance figures agree:

1. Each record gets the goal of the policy version active when it ended, its interval, for a response time goal
   (average, percentile) its bucket (response time as a share of the goal), and its response-time bin (1 ms wide
   below 100 ms, then 1% wide).
2. The rows are made narrow: the group as a 64-bit hash of its names (its goal follows from them), the work token
   as a 64-bit fingerprint (xxHash64), the rest numbers (the strings made the shuffle cost three times as much).
   Copies of a record (records are written at least once) are identical rows: the rows that may have copies are
   shuffled so that copies meet in one partition, where they are dropped and the cells (group, interval, bucket,
   bin) summed. Two requests are taken for copies only if they share a cell and a fingerprint: for n requests in
   one cell, a probability of about n²/2⁶⁵ (3·10⁻⁶ for ten million; a day's cells are thousands, which makes it
   smaller by as much). The rows of files that can share no record with another file (their outbox ranges
   overlap no other's: app.work.records; extract.day_files leaves out the files another file holds) are summed
   into cells where they are read, and only the cells shuffled.
   The groups' names come from the group keys each file declares in its footer, hashed the same way; where they
   are not declared, from the distinct names of the records, a second read.
3. The cells are collected, and intervals and the whole day rolled up from them (figures.py): each level's cells in
   bin order give the percentiles and, for goals without a response time (velocity, discretionary), the level's
   average that their distribution is measured against.

Precision: counts, sums, averages, standard deviations, velocity, the distribution of response time goals and
their PI are exact. Percentiles (nearest rank) and the distribution of velocity and discretionary goals are
resolved to the bin: exact below 100 ms, and above it the percentile is the largest response in the bin that holds
the rank (less than 1% above the exact one), and a bin across a bucket limit counts as above it.

Response figures (averages, percentiles, distribution, PI) are of the requests their server ended (completed or
failed); deleted, purged and abandoned requests are counted but have no response time a goal could be met by.
Standard deviations are of the population (every request of the interval), not of a sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import reduce
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.contract.goals import TOLERANT_BUCKET_LIMITS_PCT
from spark_jobs.contract.records import GROUP_KEYS
from spark_jobs.contract.report import WHOLE_DAY_MINUTES, divides_the_day
from spark_jobs.workload_activity.figures import ADDITIVE, CELL_KEY, RESPONSE_TIME_GOALS
from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow
from spark_jobs.workload_activity.tables import GOAL_COLUMNS, GROUP, GROUP_ID, declared_groups, goal_table, group_table

# Response-time bins: exact below EXACT_BIN_LIMIT_MS, then each BIN_WIDTH (relative) wide.
EXACT_BIN_LIMIT_MS = 100
BIN_WIDTH = 0.01
DELETED_OUTCOMES = ("deleted", "purged")

# What the job reads of a record (docs/work-records.md); Parquet hands over only these columns.
RECORD_COLUMNS = (
    "token",
    "application_environment",
    "node",
    "service_class",
    "period",
    "report_class",
    "policy_version",
    "outcome",
    "ended_at",
    "response_time_ms",
    "queue_time_ms",
    "execution_time_ms",
    "life",
)


def day_bounds(report_date: date) -> tuple[datetime, datetime]:
    start = datetime(report_date.year, report_date.month, report_date.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def _epoch_micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def active_version(steps: Sequence[ActivationStep], ended_at: Column) -> Column:
    """The policy version active at `ended_at`, from the day's activation steps (null before the first)."""
    latest_first = sorted(steps, key=lambda step: step.starts_at, reverse=True)
    if not latest_first:
        return F.lit(None).cast("int")
    expression = F.when(ended_at >= F.lit(latest_first[0].starts_at), latest_first[0].version)
    for step in latest_first[1:]:
        expression = expression.when(ended_at >= F.lit(step.starts_at), step.version)
    return expression


def _double(value: float) -> str:
    """`value` as a SQL double literal (a bare 1.5 would be a decimal)."""
    return f"{value!r}D"


def bucket_index(response_ms: str, goal_ms: str) -> str:
    """The bucket (0..13) of a response: the first limit, in percent of `goal_ms`, it does not exceed (with the
    contract's tolerance for float noise on a limit, as the live evaluation has it).

    The expressions of this module are SQL text (F.expr, selectExpr): each is one call to the JVM, where built as
    Columns the job's were some 8,300 calls, about 2.5 s of a run's planning."""
    cases = " ".join(
        f"WHEN ({response_ms}) * 100.0D <= ({goal_ms}) * {_double(limit)} THEN {index}"
        for index, limit in enumerate(TOLERANT_BUCKET_LIMITS_PCT)
    )
    return f"CASE {cases} ELSE {len(TOLERANT_BUCKET_LIMITS_PCT)} END"


def response_bin(response_ms: str) -> str:
    """The response time's bin: the millisecond below EXACT_BIN_LIMIT_MS, then bins 1% wide (a geometric series),
    so a day's bins are few (about 1,800 up to a day) and none holds responses more than 1% apart."""
    geometric = f"CAST(floor(ln(({response_ms}) / {_double(EXACT_BIN_LIMIT_MS)}) / {_double(math.log(1 + BIN_WIDTH))}) AS BIGINT)"
    return f"IF(({response_ms}) < {EXACT_BIN_LIMIT_MS}, {response_ms}, {EXACT_BIN_LIMIT_MS} + {geometric})"


def _sql_list(values: Sequence[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def versioned(records: DataFrame, steps: Sequence[ActivationStep]) -> DataFrame:
    """`records` with the policy version active when each ended, and no null report class."""
    return records.withColumns(
        {
            "policy_version": F.coalesce(active_version(steps, F.col("ended_at")), F.col("policy_version")),
            "report_class": F.coalesce(F.col("report_class"), F.lit("")),
        }
    )


def with_goals(rows: DataFrame, goals: DataFrame) -> DataFrame:
    """`versioned` rows with their version's goal (`goals` has GoalRow's columns; rows of a class period no version
    defines are left out) and `group_id`, a hash of the group's names (the goal is the version's: no part of it).

    The goal is joined by a 64-bit hash of version, class and period: a lookup by one number, where joined by the
    three columns each row's class name was copied into a key and compared (with the outcome coded once in
    `_narrow`: the read's CPU time 9.3–9.6 s → 8.2–8.6 s on 10 million records, three interleaved pairs). A
    row would take a goal not its own (another period's, or one where its period has none) only if its version,
    class and period shared the hash with a goal's: for the day's few dozen class periods, about 10^-16."""
    goal_key = "xxhash64(policy_version, service_class, period)"
    keyed_goals = goals.selectExpr(f"{goal_key} AS goal_key", *GOAL_COLUMNS)
    return (
        rows.where("policy_version IS NOT NULL AND service_class IS NOT NULL AND period IS NOT NULL")
        .withColumn("goal_key", F.expr(goal_key))
        .join(F.broadcast(keyed_goals), "goal_key", "inner")
        .drop("goal_key")
        .withColumn("group_id", F.expr(GROUP_ID))
    )


def groups(rows: DataFrame, goals: DataFrame) -> DataFrame:
    """The names and goal of each group of `versioned` rows, by `group_id` (tables.group_table has the same of the
    groups the files declare): the hash is taken of the distinct names, not of every row."""
    return with_goals(rows.select(*GROUP_KEYS).distinct(), goals).select("group_id", *GROUP)


# Outcome codes: the shuffled rows carry a small integer instead of the outcome's name.
_COMPLETED, _FAILED, _DELETED, _ABANDONED = range(4)


def cells(rows: DataFrame | None, report_date: date, interval_minutes: int, distinct_rows: DataFrame | None = None) -> DataFrame:
    """The one aggregation over raw rows (`with_goals`): per group, interval (its number in the day), bucket (null
    for requests not ended by their server, and for goals without a response time) and response-time bin, the
    counts and sums of one copy of each record; each cell once. `rows` may hold copies; `distinct_rows` are rows
    known to hold none, of a record of their own or of `rows`: summed as they are, without the shuffle of every row
    that dropping copies takes. One of the two may be None."""
    parts = []
    if rows is not None:
        deduplicated = (
            _narrow(rows, report_date, interval_minutes)
            .repartition("group_id", "interval")
            .dropDuplicates([*CELL_KEY, "token_fingerprint"])
        )
        parts.append(deduplicated.groupBy(*CELL_KEY).agg(*_cell_totals()))
    if distinct_rows is not None:
        parts.append(_narrow(distinct_rows, report_date, interval_minutes).groupBy(*CELL_KEY).agg(*_cell_totals()))
    if len(parts) == 1:
        return parts[0]
    # A cell can come out of either part.
    return parts[0].unionByName(parts[1]).groupBy(*CELL_KEY).agg(*_summed_cells())


def _narrow(rows: DataFrame, report_date: date, interval_minutes: int) -> DataFrame:
    # The outcome's code once per row, in a projection of its own: written into each figure that asks whether the
    # request ended, its names were compared eight times a row (see with_goals for what the two changes saved).
    coded = rows.selectExpr(
        "*",
        f"CASE WHEN outcome = 'completed' THEN {_COMPLETED} WHEN outcome = 'failed' THEN {_FAILED}"
        f" WHEN outcome IN ({_sql_list(DELETED_OUTCOMES)}) THEN {_DELETED} ELSE {_ABANDONED} END AS outcome_code",
    )
    ended = f"outcome_code <= {_FAILED}"
    since_midnight_us = f"unix_micros(ended_at) - {_epoch_micros(day_bounds(report_date)[0])}"
    return coded.selectExpr(
        "group_id",
        f"CAST(floor(({since_midnight_us}) / {interval_minutes * 60 * 1_000_000}) AS INT) AS interval",
        # An ended request of a response time goal always has a bucket (figures._ranked tells the other goals by that).
        f"IF({ended} AND goal_type IN ({_sql_list(RESPONSE_TIME_GOALS)}), {bucket_index('response_time_ms', 'goal_ms')}, NULL) AS bucket",
        f"IF({ended}, {response_bin('response_time_ms')}, NULL) AS bin",
        # One copy per life: a retried dead letter lives again under its token (a file older than `life` has none).
        "xxhash64(token, coalesce(life, 1)) AS token_fingerprint",
        "outcome_code AS outcome",
        f"IF({ended}, response_time_ms, NULL) AS response_ms",
        f"IF({ended}, queue_time_ms, NULL) AS queue_ms",
        f"IF({ended}, execution_time_ms, NULL) AS execution_ms",
        # A request's own velocity is 100 × execution / response; one that took no time has none.
        f"IF({ended} AND response_time_ms > 0, execution_time_ms * 100 >= goal_velocity * response_time_ms, NULL) AS velocity_met",
    )


def _cell_totals() -> list[Column]:
    return [
        F.expr(total)
        for total in (
            f"count_if(outcome <= {_FAILED}) AS ended",
            f"count_if(outcome = {_FAILED}) AS failed",
            f"count_if(outcome = {_DELETED}) AS deleted",
            f"count_if(outcome = {_ABANDONED}) AS abandoned",
            "count_if(velocity_met) AS velocity_met",
            "count(velocity_met) AS velocity_known",
            *(f"sum({name}_ms) AS {name}_sum" for name in ("response", "queue", "execution")),
            *(f"sum(CAST({name}_ms AS DOUBLE) * {name}_ms) AS {name}_squares" for name in ("response", "queue", "execution")),
            "max(response_ms) AS response_max",
        )
    ]


def _summed_cells() -> list[Column]:
    return [*(F.expr(f"sum({name}) AS {name}") for name in ADDITIVE), F.expr("max(response_max) AS response_max")]


class ReportQuery(NamedTuple):
    """What Spark computes of a day's report: its `cells` (`cells`' columns) and its `groups` (`group_id` and GROUP:
    the names and goal of each group, by the group keys the files declare or, without those, of the records)."""

    cells: DataFrame
    groups: DataFrame


def report_query(
    records: DataFrame | None,
    goals: Sequence[GoalRow],
    steps: Sequence[ActivationStep],
    report_date: date,
    interval_minutes: int = 15,
    declared_keys: Sequence[Mapping[str, Any]] | None = None,
    distinct_records: DataFrame | None = None,
) -> ReportQuery:
    """The cells and groups of `report_date`'s report (figures.report_of_cells makes its rows of them): per service
    class period of each AE, node, report class and policy version, and interval of `interval_minutes`. `records` are
    that day's work records (copies allowed; None: every record is in `distinct_records`), `goals` those of every
    policy version (goal_rows), `steps` the day's policy activations, `declared_keys` the group keys the records' files
    declare (None: found in the records, a second read), `distinct_records` more records of the day known to share no
    request with any other record (see `cells`)."""
    if not divides_the_day(interval_minutes):
        raise ValueError(f"interval_minutes must divide a day (1..{WHOLE_DAY_MINUTES}), got {interval_minutes}")
    day_start, day_end = day_bounds(report_date)

    def of_the_day(table: DataFrame) -> DataFrame:
        return versioned(
            table.select(*RECORD_COLUMNS).where((F.col("ended_at") >= F.lit(day_start)) & (F.col("ended_at") < F.lit(day_end))), steps
        )

    if records is None and distinct_records is None:
        raise ValueError("no records: give records, distinct_records or both")
    spark = next(table for table in (records, distinct_records) if table is not None).sparkSession
    goal_frame = goal_table(spark, goals)
    rows, distinct_rows = (None if table is None else of_the_day(table) for table in (records, distinct_records))
    cell_table = cells(
        None if rows is None else with_goals(rows, goal_frame),
        report_date,
        interval_minutes,
        None if distinct_rows is None else with_goals(distinct_rows, goal_frame),
    )
    if declared_keys is not None:
        group_frame = group_table(spark, declared_groups(declared_keys, steps, goals))
    else:
        group_frame = groups(reduce(DataFrame.unionByName, [table for table in (rows, distinct_rows) if table is not None]), goal_frame)
    return ReportQuery(cell_table, group_frame)
