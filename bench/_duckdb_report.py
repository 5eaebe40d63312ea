"""The nightly report in DuckDB, bench/report.py's yardstick: the report's query and the delay columns' query, as
text. bench/report.py times the two in its own process; bench/_duckdb_job.py runs them as a job of its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spark_jobs.contract.delay_samples import DEDUP_KEY, STATE_COLUMNS
from spark_jobs.contract.goals import RESPONSE_BUCKET_LIMITS_PCT
from spark_jobs.workload_activity.delays import QUEUE, STATE_PCT_COLUMNS
from spark_jobs.workload_activity.policy_goals import GoalRow

# The report's response-time percentiles, in the order of the query's list.
PERCENTILES = (50, 90, 99)
BUCKETS = len(RESPONSE_BUCKET_LIMITS_PCT) + 1


def report_query(goals: Sequence[GoalRow], records: Path) -> str:
    """The report of the records under `records` (a day's partition): copies dropped by token and life, the goal of
    each class period (`goals`: one policy version's), per AE, node, class, period, report class and 15 minutes
    (the whole day: interval_start null) counts, mean and standard deviation of response, queue and execution time,
    exact percentiles, the 14 buckets against the goal, velocity."""
    values = ", ".join(f"('{g.service_class}', {g.period}, '{g.goal_type}', {g.goal_ms or 'NULL'})" for g in goals)
    bucket = (
        "CASE "
        + " ".join(f"WHEN response_time_ms * 100.0 <= goal_ms * {limit} THEN {i}" for i, limit in enumerate(RESPONSE_BUCKET_LIMITS_PCT))
        + f" ELSE {len(RESPONSE_BUCKET_LIMITS_PCT)} END"
    )
    bucket_counts = ", ".join(f"count(*) FILTER (WHERE ended AND bucket = {i}) AS bucket_{i}" for i in range(BUCKETS))
    fractions = ", ".join(str(p / 100) for p in PERCENTILES)
    return f"""
        WITH goals(service_class, period, goal_type, goal_ms) AS (VALUES {values}),
        records AS (
            SELECT DISTINCT ON (token, coalesce(life, 1)) * FROM read_parquet('{records}/*.parquet')
        ),
        rows AS (
            SELECT r.application_environment, r.node, r.service_class, r.period, coalesce(r.report_class, '') AS report_class,
                   time_bucket(INTERVAL 15 MINUTE, timezone('UTC', r.ended_at)) AS interval_start,
                   r.outcome IN ('completed', 'failed') AS ended,
                   r.outcome, r.response_time_ms, r.queue_time_ms, r.execution_time_ms, g.goal_type, g.goal_ms,
                   CASE WHEN g.goal_ms IS NOT NULL THEN {bucket} END AS bucket
            FROM records r JOIN goals g USING (service_class, period)
        )
        SELECT application_environment, node, service_class, period, report_class, interval_start,
               count(*) FILTER (WHERE ended) AS ended_count, count(*) FILTER (WHERE outcome = 'failed') AS failed_count,
               count(*) FILTER (WHERE outcome IN ('deleted', 'purged')) AS deleted_count,
               count(*) FILTER (WHERE outcome = 'abandoned') AS abandoned_count,
               avg(response_time_ms) FILTER (WHERE ended) AS response_avg_ms,
               stddev_pop(response_time_ms) FILTER (WHERE ended) AS response_stddev_ms,
               avg(queue_time_ms) FILTER (WHERE ended) AS queue_avg_ms, stddev_pop(queue_time_ms) FILTER (WHERE ended) AS queue_stddev_ms,
               avg(execution_time_ms) FILTER (WHERE ended) AS execution_avg_ms,
               stddev_pop(execution_time_ms) FILTER (WHERE ended) AS execution_stddev_ms,
               quantile_disc(response_time_ms, [{fractions}]) FILTER (WHERE ended) AS percentiles,
               100.0 * sum(execution_time_ms) FILTER (WHERE ended) / sum(response_time_ms) FILTER (WHERE ended) AS velocity,
               {bucket_counts}
        FROM rows
        GROUP BY GROUPING SETS ((application_environment, node, service_class, period, report_class, interval_start),
                                (application_environment, node, service_class, period, report_class))
    """


# The delay columns: the day's samples, copies dropped by the contract's key, summed per class queue and 15 minutes and
# for the day, each state a percentage of the states counted (null where none were). (Quoted: `using` is a keyword.)
_STATES = " + ".join(f'sum("{state}")' for state in STATE_COLUMNS)
_PERCENTAGES = ", ".join(
    f'100.0 * sum("{state}") / nullif({_STATES}, 0) AS {pct}' for state, pct in zip(STATE_COLUMNS, STATE_PCT_COLUMNS, strict=True)
)


def delay_query(samples: Path) -> str:
    """The delay columns of the samples under `samples` (a day's partition): QUEUE, interval_minutes,
    interval_start, then the report's DELAY_COLUMNS."""
    return f"""
        WITH samples AS (SELECT DISTINCT ON ({", ".join(DEDUP_KEY)}) * FROM read_parquet('{samples}/*.parquet'))
        SELECT {", ".join(QUEUE)},
               CASE WHEN GROUPING(interval_start) = 0 THEN 15 ELSE 1440 END AS interval_minutes,
               coalesce(interval_start, min(day_start)) AS interval_start,
               sum(samples) AS delay_samples,
               {_PERCENTAGES}
        FROM (SELECT *, time_bucket(INTERVAL 15 MINUTE, timezone('UTC', minute)) AS interval_start,
                     date_trunc('day', timezone('UTC', minute)) AS day_start
              FROM samples)
        GROUP BY GROUPING SETS (({", ".join(QUEUE)}, interval_start), ({", ".join(QUEUE)}))
    """
