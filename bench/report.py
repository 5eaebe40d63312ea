"""The nightly workload activity report on a day of 10 and of 20 million synthetic work records, against DuckDB.

    .venv/bin/python bench/report.py [--millions 10 20]

Starts the real service once to install the example policy (examples/policy.yaml) into a scratch SQLite database,
stops it, writes each day of records (bench/_report_data.py: the records' schema and layout, 0.5% of them twice), then
times `wlm report run --date ...` as a process of its own: wall time from its start to its exit, the JVM's start,
reading the policy, Parquet and the database upsert included. The job's first run on a machine writes the driver JVM's
class-data archive (spark_jobs/common/class_archive.py) as its JVM exits; the benchmark makes that first run on a day
of 10,000 records, times it apart, and the timed days then map the archive, as every nightly run after the first does.
The job runs on the Java it chooses (JAVA_HOME if the benchmark is given one, else the newest installed Java Spark
supports: spark_jobs/common/java_home.py); the JSON names it. The generated files are flushed to disk before the timed
runs. DuckDB, the single-machine yardstick, then computes the same report of the 10 million day in the same run:
copies dropped by token and life, the goal of each class period, per AE, node, class, period, report class and 15 minutes and
for the whole day: counts, mean and standard deviation of response, queue and execution time, exact percentiles, the
14 buckets against the goal, velocity; the two must count the same ended requests. The last line is one JSON object of
the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report_data import MissingValueRule, check_value_rules, generate  # noqa: E402
from bench._service import ADMIN_KEY, ROOT, WLM, Service, machine  # noqa: E402
from spark_jobs.contract.goals import RESPONSE_BUCKET_LIMITS_PCT  # noqa: E402
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo, goal_rows  # noqa: E402

FIRST_DAY = date(2026, 11, 1)
WARM_UP_DAY, WARM_UP_REQUESTS = date(2026, 10, 31), 10_000


def install_policy() -> Path:
    """A data directory whose database holds the example policy, installed through the API."""
    service = Service()
    try:
        response = httpx.put(
            f"{service.url}/v1/policy",
            content=(ROOT / "examples" / "policy.yaml").read_bytes(),
            headers={"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/yaml"},
            timeout=30,
        )
        response.raise_for_status()
    finally:
        service.stop()
    return service.dir / "data"


def run_report(data_dir: Path, day: date) -> tuple[float, str, str]:
    """The job's wall time, its summary line and the Java it ran on (spark_jobs/common/java_home.py chooses)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")} | {"WLM_DATA_DIR": str(data_dir)}
    started = time.perf_counter()
    result = subprocess.run([WLM, "report", "run", "--date", day.isoformat()], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"the report failed:\n{result.stderr[-3000:]}")
    java = re.search(r"starting Spark on Java (\S+)", result.stderr)
    return elapsed, result.stdout.strip().splitlines()[-1], java.group(1) if java else "on the PATH"


def duckdb_report(records: Path) -> tuple[float, int]:
    """The same report in DuckDB, on every core; returns its wall time and the whole day's ended count."""
    policy = PolicyVersionInfo(1, datetime.now(UTC), yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text()))
    goals = ", ".join(f"('{g.service_class}', {g.period}, '{g.goal_type}', {g.goal_ms or 'NULL'})" for g in goal_rows([policy]))
    limits = RESPONSE_BUCKET_LIMITS_PCT
    bucket = (
        "CASE "
        + " ".join(f"WHEN response_time_ms * 100.0 <= goal_ms * {limit} THEN {i}" for i, limit in enumerate(limits))
        + f" ELSE {len(limits)} END"
    )
    bucket_counts = ", ".join(f"count(*) FILTER (WHERE ended AND bucket = {i}) AS bucket_{i}" for i in range(len(limits) + 1))
    query = f"""
        WITH goals(service_class, period, goal_type, goal_ms) AS (VALUES {goals}),
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
               avg(response_time_ms) FILTER (WHERE ended), stddev_pop(response_time_ms) FILTER (WHERE ended),
               avg(queue_time_ms) FILTER (WHERE ended), stddev_pop(queue_time_ms) FILTER (WHERE ended),
               avg(execution_time_ms) FILTER (WHERE ended), stddev_pop(execution_time_ms) FILTER (WHERE ended),
               quantile_disc(response_time_ms, [0.5, 0.9, 0.99]) FILTER (WHERE ended),
               100.0 * sum(execution_time_ms) FILTER (WHERE ended) / sum(response_time_ms) FILTER (WHERE ended) AS velocity,
               {bucket_counts}
        FROM rows
        GROUP BY GROUPING SETS ((application_environment, node, service_class, period, report_class, interval_start),
                                (application_environment, node, service_class, period, report_class))
    """
    connection = duckdb.connect()
    started = time.perf_counter()
    rows = connection.execute(query).fetchall()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, sum(row[6] for row in rows if row[5] is None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=int, nargs=2, default=(10, 20), metavar=("SMALL", "LARGE"), help="the two day sizes")
    args = parser.parse_args()
    small, large = args.millions
    try:
        check_value_rules()  # before anything starts: a column of the contract the generator cannot fill
    except MissingValueRule as error:
        sys.exit(str(error))
    print(f"machine: {machine()}; the job, its JVM and this process share the cores", flush=True)
    data_dir = install_policy()
    figures: dict[str, float | int] = {}
    days = {small: FIRST_DAY, large: date(2026, 11, 2)}
    for millions, day in days.items():
        started = time.perf_counter()
        rows = generate(data_dir / "records", day, millions * 1_000_000)
        print(f"{day}: {rows:,} records written in {time.perf_counter() - started:.1f} s", flush=True)
    generate(data_dir / "records", WARM_UP_DAY, WARM_UP_REQUESTS)
    os.sync()  # the nightly job reads files written during the day, long on disk: no writeback during the runs
    seconds, summary, java = run_report(data_dir, WARM_UP_DAY)
    print(
        f"first run, on a day of {WARM_UP_REQUESTS:,} requests (writes the class-data archive): {seconds:.1f} s wall ({summary})",
        flush=True,
    )
    print(f"the job's driver runs on Java {java}", flush=True)
    figures["first_run_small_day_s"] = round(seconds, 1)
    spark_ended = {}
    for millions, day in days.items():
        seconds, summary, _ = run_report(data_dir, day)
        print(f"spark {millions}M: {seconds:.1f} s wall ({summary})", flush=True)
        figures[f"spark_{millions}m_s"] = round(seconds, 1)
        spark_ended[millions] = int(re.search(r"(\d+) ended requests", summary).group(1))  # type: ignore[union-attr]
    duck_s, duck_ended = duckdb_report(data_dir / "records" / f"date={FIRST_DAY.isoformat()}")
    print(f"duckdb {small}M: {duck_s:.1f} s ({duck_ended:,} ended requests)", flush=True)
    if spark_ended[small] != duck_ended:  # both dropped the copies, each its own way
        raise RuntimeError(f"the job counted {spark_ended[small]:,} ended requests, DuckDB {duck_ended:,}")
    figures[f"duckdb_{small}m_s"] = round(duck_s, 1)
    figures["growth_large_over_small"] = round(figures[f"spark_{large}m_s"] / figures[f"spark_{small}m_s"], 2)
    figures["spark_over_duckdb"] = round(figures[f"spark_{small}m_s"] / duck_s, 2)
    print(json.dumps(figures | {"java": java}))


if __name__ == "__main__":
    main()
