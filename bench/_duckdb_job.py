"""The nightly report as a DuckDB job of its own, for bench/report.py's like-for-like figure (`duckdb_job_s`): what
`wlm report run` does, in a process of its own, with DuckDB for Spark. It reads the policy's goals from the service's
database as the job does, runs the report's query and the delay columns' query (bench/_duckdb_report.py: the ones
the benchmark times in its own process), writes the report's rows as one Parquet file under
OUTPUT/date=YYYY-MM-DD (replacing a rerun's) and replaces the date's rows of `workload_reports` in DATABASE_URL (a
scratch copy of the service's database) through the job's own function.

    python bench/_duckdb_job.py --date DAY --records DIR --samples DIR --database-url URL --output DIR

Its rows have the table's columns; what the yardstick's query does not compute (performance index, goal met share)
is null. The last line on stdout is one JSON object: `rows`, `ended` (the whole day's ended requests)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import astuple
from datetime import date
from pathlib import Path

import duckdb

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from bench._duckdb_report import BUCKETS, PERCENTILES, delay_query, report_query  # noqa: E402
from spark_jobs.workload_activity.database_rows import read_policy_versions, replace_date  # noqa: E402
from spark_jobs.workload_activity.delays import DELAY_COLUMNS, QUEUE  # noqa: E402
from spark_jobs.workload_activity.policy_goals import goal_rows  # noqa: E402

# The report's rows as the `workload_reports` table has them (r: the report query's, g: the goals', d: the delays').
_ROWS = f"""
    SELECT DATE '{{day}}' AS report_date,
           coalesce(r.interval_start, TIMESTAMP '{{day}} 00:00:00') AS interval_start,
           CASE WHEN r.interval_start IS NULL THEN 1440 ELSE 15 END AS interval_minutes,
           r.application_environment, r.node, r.service_class, r.period, r.report_class,
           g.policy_version, g.goal_type, g.goal_ms, g.goal_percentile, g.goal_velocity, g.importance,
           r.ended_count, r.failed_count,
           r.ended_count / (CASE WHEN r.interval_start IS NULL THEN 1440 ELSE 15 END * 60.0)::DOUBLE AS ended_per_s,
           r.deleted_count, r.abandoned_count,
           r.response_avg_ms, r.response_stddev_ms, r.queue_avg_ms, r.queue_stddev_ms, r.execution_avg_ms, r.execution_stddev_ms,
           {", ".join(f"r.percentiles[{i}]::DOUBLE AS response_p{p}_ms" for i, p in enumerate(PERCENTILES, 1))},
           [{", ".join(f"r.bucket_{i}" for i in range(BUCKETS))}] AS buckets,
           r.velocity::DOUBLE AS execution_velocity, NULL::DOUBLE AS performance_index, NULL::DOUBLE AS goal_met_share,
           {", ".join(f"d.{name}" for name in DELAY_COLUMNS)}
    FROM report r
    JOIN goal_rows g USING (service_class, period)
    LEFT JOIN delays d ON {" AND ".join(f"d.{name} = r.{name}" for name in QUEUE)}
        AND d.interval_minutes = CASE WHEN r.interval_start IS NULL THEN 1440 ELSE 15 END
        AND d.interval_start = coalesce(r.interval_start, TIMESTAMP '{{day}} 00:00:00')
"""
_GOAL_ROWS = (
    "CREATE TEMP TABLE goal_rows (policy_version INTEGER, service_class VARCHAR, period INTEGER, goal_type VARCHAR,"
    " goal_ms BIGINT, goal_percentile INTEGER, goal_velocity INTEGER, importance INTEGER)"
)


def run(day: date, records: Path, samples: Path, database_url: str, output: Path) -> tuple[int, int]:
    """The day's report written; returns its rows and the whole day's ended requests."""
    versions = read_policy_versions(database_url)
    # The yardstick's query joins goals by class and period: those of the latest version (the benchmark installs one).
    latest = max(info.version for info in versions)
    goals = [goal for goal in goal_rows(versions) if goal.policy_version == latest]
    connection = duckdb.connect()
    try:
        connection.execute(_GOAL_ROWS)
        connection.executemany("INSERT INTO goal_rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [astuple(goal) for goal in goals])
        connection.execute(f"CREATE TEMP TABLE report AS {report_query(goals, records)}")
        connection.execute(f"CREATE TEMP TABLE delays AS {delay_query(samples)}")
        connection.execute(f"CREATE TEMP TABLE report_rows AS {_ROWS.format(day=day.isoformat())}")
        partition = output / f"date={day.isoformat()}"
        shutil.rmtree(partition, ignore_errors=True)
        partition.mkdir(parents=True)
        connection.execute(f"COPY report_rows TO '{partition / 'part-0.parquet'}' (FORMAT parquet)")
        cursor = connection.execute("SELECT * FROM report_rows")
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        connection.close()
    replace_date(database_url, day, rows)
    return len(rows), sum(row["ended_count"] for row in rows if row["interval_minutes"] == 1440)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--date", type=date.fromisoformat, required=True)
    parser.add_argument("--records", type=Path, required=True, help="the day's partition of the work records")
    parser.add_argument("--samples", type=Path, required=True, help="the day's partition of the delay samples")
    parser.add_argument("--database-url", required=True, help="a scratch copy of the service's database")
    parser.add_argument("--output", type=Path, required=True, help="the reports' directory (a directory per date)")
    args = parser.parse_args()
    rows, ended = run(args.date, args.records, args.samples, args.database_url, args.output)
    print(json.dumps({"rows": rows, "ended": ended}))


if __name__ == "__main__":
    main()
