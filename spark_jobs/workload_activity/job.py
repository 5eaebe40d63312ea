"""The nightly job: extract → transform → load, a line per stage on stderr and the details in its log."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.common.job_log import JobLog
from spark_jobs.contract.report import WHOLE_DAY_MINUTES
from spark_jobs.workload_activity.database_rows import read_policy_versions, replace_date
from spark_jobs.workload_activity.delays import delay_sums, with_delays
from spark_jobs.workload_activity.extract import (
    day_files,
    day_footers,
    day_path,
    declared_group_keys,
    read_day_files,
    read_delay_samples,
)
from spark_jobs.workload_activity.figures import report_of_cells
from spark_jobs.workload_activity.load import write_parquet
from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow, activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds, report_query


@dataclass(frozen=True, slots=True)
class JobResult:
    report_date: date
    rows: int
    ended: int
    parquet: str


def collect_report(
    records: DataFrame | None,
    goals: Sequence[GoalRow],
    steps: Sequence[ActivationStep],
    report_date: date,
    interval_minutes: int,
    declared_keys: Sequence[Mapping[str, Any]] | None,
    distinct_records: DataFrame | None,
    progress: Callable[[str], None],
    sums: pa.Table | None = None,
) -> pa.Table:
    """The report's rows (figures.REPORT_SCHEMA), their delay columns of the day's delay `sums` (delays.with_delays;
    None: null), every one named: Spark sums the records into cells, which are collected (a day's are about its
    groups × intervals × response-time bins, however many its records: 725,000 cells, 94 MB, for 10 million records
    in 24 groups) and made the report's rows here (figures.report_of_cells). If a file declared fewer groups than it
    holds (not one this project wrote), the groups are found in the records."""
    query = report_query(records, goals, steps, report_date, interval_minutes, declared_keys, distinct_records)
    cells = query.cells.toArrow()
    groups = query.groups.toArrow()
    if declared_keys is not None and cells.num_rows and not pc.all(pc.is_in(cells["group_id"], value_set=groups["group_id"])).as_py():
        progress("a group no file declared: reading the records again to name the groups")
        groups = report_query(records, goals, steps, report_date, interval_minutes, None, distinct_records).groups.toArrow()
    return with_delays(report_of_cells(cells, groups, report_date, interval_minutes), sums)


def run(
    report_date: date,
    *,
    session: Future[SparkSession],
    records_uri: str,
    output_uri: str,
    database_url: str,
    log: JobLog,
    interval_minutes: int = 15,
    delay_samples_uri: str | None = None,
) -> JobResult:
    """The report of `report_date` on the `session` being started (session.job_session, entered before this module's
    imports by arguments.run_from_arguments); its delay columns from the delay samples under `delay_samples_uri`
    (None, or a day without samples: nulls)."""
    # Summed on the driver while the JVM starts (delays.py): Arrow computes without holding the GIL.
    with ThreadPoolExecutor(1) as pool:
        sums = pool.submit(_delay_sums, delay_samples_uri, report_date, interval_minutes)
        return _report(report_date, session, sums, records_uri, output_uri, database_url, log, interval_minutes)


def _delay_sums(samples_uri: str | None, report_date: date, interval_minutes: int) -> tuple[pa.Table | None, str]:
    """The day's delay samples summed (None without any) and what to log of them."""
    samples = None if samples_uri is None else read_delay_samples(samples_uri, report_date)
    if samples is None:
        return (
            None,
            f"no delay samples of {report_date}{'' if samples_uri is None else f' under {samples_uri}'}: the delay columns are null",
        )
    sums = delay_sums(samples, report_date, interval_minutes)
    return sums, f"{samples.num_rows} delay sample rows: {sums.num_rows} rows of class queue and interval"


def _report(
    report_date: date,
    session: Future[SparkSession],
    sums: Future[tuple[pa.Table | None, str]],
    records_uri: str,
    output_uri: str,
    database_url: str,
    log: JobLog,
    interval_minutes: int,
) -> JobResult:
    # Read while the JVM starts: the policy, the day's files and their footers.
    versions = read_policy_versions(database_url)
    log.detail(f"{len(versions)} policy versions")
    log.stage(f"reading the work records of {report_date}")
    goals = goal_rows(versions)
    steps = activation_steps(versions, *day_bounds(report_date))
    footers = day_footers(records_uri, report_date, session)
    declared_keys = declared_group_keys(footers)
    if declared_keys is None:
        log.detail("not every file declares its group keys: reading the records twice")
    files = day_files(footers)
    log.detail(
        f"{len(files.not_read)} files hold only records that other files hold: not read; {len(files.copy_free)} of"
        f" {len(files.copy_free) + len(files.searched)} files share no record with another: copies are looked for in the rest"
    )
    spark = session.result()
    log.detail(f"Spark {spark.version} on {spark.sparkContext.master}; reading {day_path(records_uri, report_date)}")
    records, distinct_records = read_day_files(spark, files)
    delays, said = sums.result()
    log.detail(said)
    log.stage("computing the report")
    table = collect_report(records, goals, steps, report_date, interval_minutes, declared_keys, distinct_records, log.detail, delays)
    rows = table.to_pylist()
    ended = sum(row["ended_count"] for row in rows if row["interval_minutes"] == WHOLE_DAY_MINUTES)
    log.detail(f"{len(rows)} report rows ({ended} ended requests)")
    log.stage("writing the report")
    parquet = write_parquet(spark, table, output_uri, report_date)
    replace_date(database_url, report_date, rows)
    log.detail(f"written: {parquet} and the database's workload_reports for {report_date}")
    return JobResult(report_date, len(rows), ended, parquet)
