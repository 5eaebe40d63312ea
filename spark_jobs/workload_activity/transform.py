"""The workload activity report as pure functions of DataFrames (no session, no I/O).

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
3. Intervals and the whole day are rolled up from the cells. A window over each group's cells in bin order gives
   the percentiles and, for goals without a response time (velocity, discretionary), the group's average that
   their distribution is measured against.

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
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.contract.goals import (
    BUCKET_COUNT,
    DISCRETIONARY_PI,
    MAX_VELOCITY_PI,
    TOLERANT_BUCKET_LIMITS_PCT,
    WITHIN_GOAL_BUCKETS,
    bucket_pi,
)
from spark_jobs.contract.records import GROUP_KEYS
from spark_jobs.contract.report import WHOLE_DAY_MINUTES, divides_the_day
from spark_jobs.workload_activity.delays import DELAY_COLUMNS, null_delays
from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow
from spark_jobs.workload_activity.tables import GOAL_COLUMNS, GROUP, GROUP_ID, declared_groups, goal_table, group_table

REPORT_PERCENTILES = (50, 90, 99)
# Response-time bins: exact below EXACT_BIN_LIMIT_MS, then each BIN_WIDTH (relative) wide.
EXACT_BIN_LIMIT_MS = 100
BIN_WIDTH = 0.01
DELETED_OUTCOMES = ("deleted", "purged")
RESPONSE_TIME_GOALS = ("average", "percentile")

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
# Per cell (group, interval, bucket, response-time bin), summed at each level.
_ADDITIVE = (
    "ended",
    "failed",
    "deleted",
    "abandoned",
    "velocity_met",
    "velocity_known",
    "response_sum",
    "response_squares",
    "queue_sum",
    "queue_squares",
    "execution_sum",
    "execution_squares",
)

# The report's columns, in the order of the `workload_reports` table.
REPORT_COLUMNS = (
    "report_date",
    "interval_start",
    "interval_minutes",
    *GROUP,
    "ended_count",
    "failed_count",
    "ended_per_s",
    "deleted_count",
    "abandoned_count",
    "response_avg_ms",
    "response_stddev_ms",
    "queue_avg_ms",
    "queue_stddev_ms",
    "execution_avg_ms",
    "execution_stddev_ms",
    *(f"response_p{p}_ms" for p in REPORT_PERCENTILES),
    "buckets",
    "execution_velocity",
    "performance_index",
    "goal_met_share",
    *DELAY_COLUMNS,
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
    cell_key = ("group_id", "interval", "bucket", "bin")
    parts = []
    if rows is not None:
        deduplicated = (
            _narrow(rows, report_date, interval_minutes)
            .repartition("group_id", "interval")
            .dropDuplicates([*cell_key, "token_fingerprint"])
        )
        parts.append(deduplicated.groupBy(*cell_key).agg(*_cell_totals()))
    if distinct_rows is not None:
        parts.append(_narrow(distinct_rows, report_date, interval_minutes).groupBy(*cell_key).agg(*_cell_totals()))
    if len(parts) == 1:
        return parts[0]
    # A cell can come out of either part.
    return parts[0].unionByName(parts[1]).groupBy(*cell_key).agg(*_summed_cells())


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
        # An ended request of a response time goal always has a bucket (report_figures tells the other goals by that).
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


def _sums() -> list[Column]:
    return [F.expr(f"sum({name}) AS {name}") for name in _ADDITIVE]


def _summed_cells() -> list[Column]:
    return [*_sums(), F.expr("max(response_max) AS response_max")]


def levels(cell_table: DataFrame, interval_minutes: int) -> DataFrame:
    """The cells at each report level: by interval (the cells as they are), and for the whole day (interval 0 of
    1440 minutes, the intervals summed). The cells are shuffled once more, by group, and each is taken twice, as a
    cell of its interval and of the day, into one sum: that sum and the window after it (report_figures) find a
    group's cells in one partition. (The day summed apart and unioned with the intervals took a stage and a shuffle
    more, a second read of the cells, and 0.7 s more of a 10 million record day.)"""
    if interval_minutes == WHOLE_DAY_MINUTES:
        return cell_table.withColumn("interval_minutes", F.lit(interval_minutes))
    as_levels = (
        f"inline(array(named_struct('interval', interval, 'interval_minutes', {interval_minutes}),"
        f" named_struct('interval', 0, 'interval_minutes', {WHOLE_DAY_MINUTES})))"
    )
    twice = cell_table.repartition("group_id").selectExpr("group_id", "bucket", "bin", *_ADDITIVE, "response_max", as_levels)
    return twice.groupBy("group_id", "interval_minutes", "interval", "bucket", "bin").agg(*_summed_cells())


def _ratio(numerator: str, denominator: str) -> str:
    return f"IF(({denominator}) > 0, ({numerator}) / ({denominator}), NULL)"


def _stddev(squares: str, total: str, count: str) -> str:
    mean = f"({total}) / ({count})"
    return f"IF(({count}) > 0, sqrt(greatest(0.0D, ({squares}) / ({count}) - {mean} * {mean})), NULL)"


def _percentile_pi(within: Sequence[str], percentile: str, total: str) -> str:
    """The limit of the first bucket whose cumulative share reaches the percentile (integers multiplied out);
    `within` are the cumulative counts (the requests in that bucket or a lower one)."""
    cases = []
    for index, count in enumerate(within):
        cases.append(f"WHEN {count} * 100 >= ({percentile}) * ({total}) THEN {_double(bucket_pi(index))}")
    return f"CASE WHEN ({total}) > 0 THEN CASE {' '.join(cases)} END END"


def _figures(report_date: date) -> list[str]:
    """The report's columns from the summed cells of a group and interval. The distribution comes summed up to
    each bucket (`within_i`): the PI and the share that met the goal read it as it is, where from the bucket
    counts each would be a sum of sums (the method that computes the figures had half as much source again:
    154 KB against 102 KB, each addition with its overflow check)."""
    within = [f"within_{i}" for i in range(BUCKET_COUNT)]
    buckets = [within[0], *(f"{within[i]} - {within[i - 1]}" for i in range(1, BUCKET_COUNT))]
    average = _ratio("response_sum", "ended")
    velocity = _ratio("100.0D * execution_sum", "execution_sum + queue_sum")
    performance_index = (
        f"CASE WHEN goal_type = 'discretionary' THEN {_double(DISCRETIONARY_PI)}"
        f" WHEN goal_type = 'average' THEN ({average}) / goal_ms"
        f" WHEN goal_type = 'percentile' THEN ({_percentile_pi(within, 'goal_percentile', 'ended')})"
        f" WHEN ({velocity}) * {_double(MAX_VELOCITY_PI)} <= goal_velocity THEN {_double(MAX_VELOCITY_PI)}"
        f" ELSE goal_velocity / ({velocity}) END"
    )
    goal_met_share = (
        f"CASE WHEN goal_type IN ({_sql_list(RESPONSE_TIME_GOALS)}) THEN {_ratio(within[WITHIN_GOAL_BUCKETS - 1], 'ended')}"
        f" WHEN goal_type = 'velocity' THEN {_ratio('velocity_met', 'velocity_known')} END"
    )
    return [
        f"DATE '{report_date.isoformat()}' AS report_date",
        "interval_start",
        "interval_minutes",
        *GROUP,
        "ended AS ended_count",
        "failed AS failed_count",
        "ended / (interval_minutes * 60.0D) AS ended_per_s",
        "deleted AS deleted_count",
        "abandoned AS abandoned_count",
        f"{average} AS response_avg_ms",
        f"{_stddev('response_squares', 'response_sum', 'ended')} AS response_stddev_ms",
        f"{_ratio('queue_sum', 'ended')} AS queue_avg_ms",
        f"{_stddev('queue_squares', 'queue_sum', 'ended')} AS queue_stddev_ms",
        f"{_ratio('execution_sum', 'ended')} AS execution_avg_ms",
        f"{_stddev('execution_squares', 'execution_sum', 'ended')} AS execution_stddev_ms",
        *(f"response_p{p}_ms" for p in REPORT_PERCENTILES),
        f"array({', '.join(buckets)}) AS buckets",
        f"{velocity} AS execution_velocity",
        f"{performance_index} AS performance_index",
        f"{goal_met_share} AS goal_met_share",
        *null_delays(),
    ]


def report_figures(level_table: DataFrame, group_table: DataFrame, report_date: date) -> DataFrame:
    """One report row per group and interval of `levels`, named by `groups`. The cells are summed per level
    (the window's partitioning, so no shuffle) and named after: the wide names are never a key of the many cells.
    A group `group_table` lacks keeps its row, with null names and goal (the job checks for those)."""
    # The window sorts its rows by their partition first: led by a hash of the level, the sort tells most rows
    # apart by its 64-bit prefix alone (led by the group id, shared by a hundred levels, it compared whole rows).
    # The bucket breaks a tie in bin order (0..13 and null: four bits).
    level_key = ("level_order", "group_id", "interval_minutes", "interval")
    by_bin = Window.partitionBy(*level_key).orderBy("bin_order")
    whole_group = by_bin.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    up_to_here = by_bin.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ended = F.col("ended")
    ranked = level_table.withColumns(
        {"level_order": F.expr("xxhash64(group_id, interval_minutes, interval)"), "bin_order": F.expr("bin * 16 + coalesce(bucket + 1, 0)")}
    ).select(
        "*",
        F.sum(ended).over(whole_group).alias("group_ended"),
        F.sum("response_sum").over(whole_group).alias("group_response_sum"),
        F.sum(ended).over(up_to_here).alias("ended_up_to"),
    )
    # Goals without a response time measure their distribution against the group's average: theirs are the cells
    # of ended requests without a bucket (`_narrow`).
    bucket = F.coalesce(F.col("bucket"), F.expr(bucket_index("response_max", _ratio("group_response_sum", "group_ended"))))
    # The smallest response with at least p% of the ended requests at or below it (nearest rank).
    nearest_ranks = [
        f"CAST(min(IF(ended > 0 AND ended_up_to * 100 >= group_ended * {p}, response_max, NULL)) AS DOUBLE) AS response_p{p}_ms"
        for p in REPORT_PERCENTILES
    ]
    totals = (
        ranked.withColumn("bucket", F.when(ended > 0, bucket))
        .groupBy(*level_key)
        .agg(
            *_sums(),
            *(F.expr(f"sum(IF(bucket <= {i}, ended, 0)) AS within_{i}") for i in range(BUCKET_COUNT)),
            *map(F.expr, nearest_ranks),
        )
        .join(F.broadcast(group_table), "group_id", "left")
        .withColumn(
            "interval_start",
            # UTC wall time without a zone: what a reader gets back does not depend on its own time zone.
            F.timestamp_micros(
                F.lit(_epoch_micros(day_bounds(report_date)[0])) + F.col("interval").cast("long") * F.col("interval_minutes") * 60_000_000
            ).cast("timestamp_ntz"),
        )
    )
    return totals.selectExpr(*_figures(report_date))


def workload_activity(
    records: DataFrame | None,
    goals: Sequence[GoalRow],
    steps: Sequence[ActivationStep],
    report_date: date,
    interval_minutes: int = 15,
    declared_keys: Sequence[Mapping[str, Any]] | None = None,
    distinct_records: DataFrame | None = None,
) -> DataFrame:
    """The report of `report_date`: one row per service class period of each AE, node, report class and policy
    version, per interval of `interval_minutes` and for the whole day. `records` are that day's work records (copies
    allowed; None: every record is in `distinct_records`), `goals` those of every policy version (goal_rows),
    `steps` the day's policy activations, `declared_keys` the group keys the records' files declare (None: found in
    the records),
    `distinct_records` more records of the day known to share no request with any other record (see `cells`). Its
    delay columns are null: the job fills them in the collected rows (delays.with_delays)."""
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
    return report_figures(levels(cell_table, interval_minutes), group_frame, report_date)
