"""The what-if job: a recorded day's records replayed under a candidate policy, one Spark task per application
environment, and a JSON result of the nightly report's shape, predicted beside recorded; a line per stage on stderr
(what the API shows as a run's progress) and the details in its log."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.common.driver import DriverSettings
from spark_jobs.common.job_log import JobLog
from spark_jobs.common.session import job_session
from spark_jobs.contract.records import day_has_files
from spark_jobs.contract.replay import REPLAY_QUALIFIERS
from spark_jobs.what_if.arguments import NoRecords
from spark_jobs.what_if.extract import DayRecords, read_day, read_worker_tasks, replay_rows
from spark_jobs.what_if.model import ManagerSettings
from spark_jobs.what_if.replay import (
    CHUNK,
    ENDED_BY_A_SERVER,
    REPLAY_COLUMNS,
    RESULT_SCHEMA,
    TASK_COLUMNS,
    ReplayInputs,
    replay_task,
)
from spark_jobs.workload_activity.database_rows import read_policy_versions
from spark_jobs.workload_activity.transform import day_bounds


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    path: Path
    result: dict[str, Any]


def assumptions(start_latencies_s: tuple[float, ...]) -> list[str]:
    """What the replay takes as given where the records say nothing (docs/work-records.md, contract/replay.py)."""
    qualifiers = ", ".join(f"{qualifier} ({column})" for qualifier, column in REPLAY_QUALIFIERS.items())
    latency = f"drawn from the {len(start_latencies_s)} given" if start_latencies_s else "none given: servers connect at once"
    return [
        "a request keeps its recorded service class where the candidate classifies its subsystem type by the rules of the "
        f"version that classified it; elsewhere it is classified again from the recorded qualifiers only: {qualifiers}",
        f"server start latency: {latency}",
        "the manager's settings (goal interval and window, blocked promotion) are the ones given, not recorded ones",
        "worker tasks per server: the most frequent of the environment's server connections that day, else 1",
        "requests replayed: those a server ended that day and that were inserted that day; the recorded side has no servers",
    ]


def partition_keys(spark: SparkSession, count: int) -> list[int]:
    """`count` keys, the n-th of which a repartition into `count` partitions by a column of longs puts into partition
    n (Spark's: the key's Murmur3 hash, modulo `count`): what keeps each environment a partition of its own."""
    candidates = count * 64
    while True:
        hashed = spark.range(candidates).select("id", F.expr(f"pmod(hash(id), {count})").alias("partition"))
        first: dict[int, int] = {row[0]: row[1] for row in hashed.groupBy("partition").agg(F.min("id")).collect()}
        if len(first) == count:
            return [first[n] for n in range(count)]
        candidates *= 2


def by_environment(rows: DataFrame, names: Sequence[str]) -> DataFrame:
    """`rows` (replay_rows) of the environments `names`, the n-th environment's in partition n, sorted by insert and
    then by every other column: the same order every run (rows alike in every column are alike to the replay)."""
    keys = partition_keys(rows.sparkSession, len(names))
    key_of = F.create_map(*(F.lit(part) for name, key in zip(names, keys, strict=True) for part in (name, key)))
    return (
        rows.withColumn("partition_key", key_of[F.col("application_environment")].cast("long"))
        .repartition(len(names), "partition_key")
        .sortWithinPartitions("inserted_ms", *(column for column in REPLAY_COLUMNS if column != "inserted_ms"))
        .drop("partition_key")
    )


def environment_names(records: DayRecords, rows: DataFrame, environment: str | None = None) -> list[str]:
    """The environments of the day's records (`environment` alone, if given), sorted: as the files' footers declare
    them, else from `rows` (replay_rows of `records`; a distinct over them, a read of the day). An environment
    declared but without rows of the day is an empty task, which gives no result."""
    if records.environments is None:
        return sorted(row.application_environment for row in rows.select("application_environment").distinct().collect())
    return [name for name in records.environments if environment is None or name == environment]


def replay_all(rows: DataFrame, names: Sequence[str], inputs: ReplayInputs, worker_tasks: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every environment of `rows` (replay_rows), `names` (environment_names), replayed in a Spark task of its own, in
    name order: the task reads its environment's rows (TASK_COLUMNS) as they come, in the order of their inserts
    (replay.replay_task), in Arrow batches of up to replay.CHUNK rows, and numbers their keys itself (no join)."""
    if not names:
        return []
    ended = F.coalesce(F.col("outcome").isin(*ENDED_BY_A_SERVER), F.lit(False))
    tasks = by_environment(rows, names).withColumn("ended_by_a_server", ended).select(*TASK_COLUMNS)
    rows.sparkSession.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(CHUNK))
    replay = partial(replay_task, names=names, inputs=inputs, worker_tasks=worker_tasks)
    replayed = tasks.mapInArrow(replay, RESULT_SCHEMA).collect()
    return sorted((json.loads(row.result) for row in replayed), key=lambda result: result["application_environment"])


def write_result(path: Path, result: Mapping[str, Any]) -> None:
    """`result` as JSON at `path`, whole or not at all (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial_path.write_text(json.dumps(result, indent=1))
    partial_path.replace(path)


def run(
    day: date,
    *,
    candidate: Mapping[str, Any],
    records_uri: str,
    database_url: str,
    output: Path,
    log: JobLog,
    driver: DriverSettings,
    environment: str | None = None,
    seed: int = 0,
    interval_minutes: int = 15,
    settings: ManagerSettings | None = None,
    start_latencies_s: tuple[float, ...] = (),
) -> WhatIfResult:
    """Replay `day` under `candidate` (a definition the service checked, as plain data). NoRecords when the day, or
    `environment`, has none."""
    started = time.monotonic()
    if not day_has_files(records_uri, day):
        raise NoRecords(f"no_records: no work records of {day.isoformat()}")
    settings = settings or ManagerSettings()
    with job_session("wlm-what-if", log, driver) as starting:
        versions = read_policy_versions(database_url)
        worker_tasks = read_worker_tasks(database_url, day)
        log.detail(f"{len(versions)} policy versions; worker tasks known for {len(worker_tasks)} environments")
        inputs = ReplayInputs(
            candidate=candidate,
            recorded={version.version: version.definition for version in versions},
            day_start=day_bounds(day)[0],
            settings=settings,
            start_latencies_s=start_latencies_s,
            seed=seed,
            interval_s=interval_minutes * 60.0,
        )
        log.stage(f"reading the work records of {day}")
        records = read_day(starting, records_uri, day)
        rows = replay_rows(records, day, environment)
        names = environment_names(records, rows, environment)
        log.stage("replaying each application environment under the candidate (one Spark task each)")
        environments = replay_all(rows, names, inputs, worker_tasks)
    if not environments:
        of = f" of {environment}" if environment else ""
        raise NoRecords(f"no_records: no work records{of} ended by a server on {day.isoformat()}")
    log.stage(f"writing the result of {len(environments)} environments")
    result = {
        "date": day.isoformat(),
        "policy_name": candidate.get("name"),
        "environment": environment,
        "seed": seed,
        "interval_minutes": interval_minutes,
        "settings": asdict(settings),
        "start_latencies_s": list(start_latencies_s),
        "assumptions": assumptions(start_latencies_s),
        "environments": environments,
        "seconds": round(time.monotonic() - started, 3),
    }
    write_result(output, result)
    log.detail(f"written: {output}")
    return WhatIfResult(output, result)
