"""What the what-if job reads: a day's records as the nightly report reads them (the same files, copies dropped by
token and life), narrowed to what a replay needs, and from the database the servers' worker tasks."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import date
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlalchemy import select

from spark_jobs.common.database import as_utc, database, reflected
from spark_jobs.what_if.replay import RECORD_FIELDS, REPLAY_COLUMNS, TIMES
from spark_jobs.workload_activity.extract import day_files, day_footers, declared_group_keys, read_day_files, record_types
from spark_jobs.workload_activity.transform import day_bounds

# The records' columns the job reads.
WHAT_IF_TYPES = record_types(("token", "life", "application_environment", *RECORD_FIELDS, *(f"{time}_at" for time in TIMES)))


@dataclass(frozen=True, slots=True)
class DayRecords:
    """A day's records as the nightly report reads them (extract.day_files): `searched`, the files that may hold copies
    of one another's records, and `copy_free`, those that share no record with another file; None for none."""

    searched: DataFrame | None
    copy_free: DataFrame | None
    # The environments the files declare (their footers' group keys), sorted; None where a file declares none.
    environments: list[str] | None = None


def read_day(session: Future[SparkSession], records_uri: str, day: date) -> DayRecords:
    """The day's records, of the files the nightly report reads (none that another file holds whole); their files
    are listed while `session` may still be starting (extract.day_footers)."""
    footers = day_footers(records_uri, day, session)
    files = day_files(footers)
    declared = declared_group_keys([footer for footer in footers if footer.uri not in files.not_read])
    searched, copy_free = read_day_files(session.result(), files, WHAT_IF_TYPES)
    return DayRecords(searched, copy_free, None if declared is None else sorted({key["application_environment"] for key in declared}))


def replay_rows(records: DayRecords, day: date, environment: str | None = None) -> DataFrame:
    """One row per request life that ended on `day` (of `environment`, or of every one): the environment and
    REPLAY_COLUMNS, times in milliseconds since the epoch. Copies are dropped by token and life among the files that
    may hold them; the copy-free files' rows are taken as they are, without the shuffle of every row that dropping
    copies takes (on a day without copies, none)."""
    start, end = day_bounds(day)

    def of_the_day(table: DataFrame) -> DataFrame:
        rows = table.where((F.col("ended_at") >= F.lit(start)) & (F.col("ended_at") < F.lit(end)))
        if environment is not None:
            rows = rows.where(F.col("application_environment") == environment)
        return rows.withColumn("life", F.coalesce(F.col("life"), F.lit(1)))

    parts = []
    if records.searched is not None:
        parts.append(of_the_day(records.searched).dropDuplicates(["token", "life"]))
    if records.copy_free is not None:
        parts.append(of_the_day(records.copy_free))
    if not parts:
        raise ValueError("no records: give searched, copy-free records or both")
    times = {f"{time}_ms": F.expr(f"unix_millis({time}_at)") for time in TIMES}
    return reduce(DataFrame.unionByName, parts).withColumns(times).select("application_environment", *REPLAY_COLUMNS)


def read_worker_tasks(database_url: str, day: date) -> dict[str, int]:
    """Per environment, the worker tasks its servers connected on `day` had most often (the records hold none)."""
    start, end = day_bounds(day)
    with database(database_url) as engine, engine.connect() as connection:
        connections = reflected(connection, "connections")
        columns = (
            connections.c.application_environment,
            connections.c.worker_tasks,
            connections.c.connected_at,
            connections.c.disconnected_at,
        )
        rows = connection.execute(select(*columns).where(connections.c.role == "server", connections.c.worker_tasks.is_not(None))).all()
    counts: dict[str, Counter[int]] = {}
    for environment, tasks, connected_at, disconnected_at in rows:
        # Compared here, in UTC: SQLite keeps the times without their zone.
        if as_utc(connected_at) < end and (disconnected_at is None or as_utc(disconnected_at) >= start):
            counts.setdefault(environment, Counter())[tasks] += 1
    return {environment: counter.most_common(1)[0][0] for environment, counter in counts.items()}
