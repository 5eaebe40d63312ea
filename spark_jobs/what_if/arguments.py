"""The what-if job's command line, shared by `python -m spark_jobs.what_if` and `wlm whatif` (without importing
PySpark: every `wlm` command builds this parser). Where the service keeps its data and database, and how the driver
runs, are the nightly report's JobSettings (spark_jobs/workload_activity/arguments.py)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from spark_jobs.common.job_log import JobFailed, JobLog
from spark_jobs.contract.records import day_path, partition_day
from spark_jobs.what_if.model import ManagerSettings
from spark_jobs.workload_activity.arguments import JobSettings, interval_minutes, report_date

if TYPE_CHECKING:
    from spark_jobs.what_if.job import WhatIfResult

# The exit status of a run for a day (or environment) without records: the command line's "not found".
NO_RECORDS_EXIT = 3


class NoRecords(JobFailed):
    """The day (or the environment asked for) has no records to replay."""

    code = "no_records"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 86_400:
        raise argparse.ArgumentTypeError(f"not a number of seconds from 0 to a day: {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--date", type=report_date, required=True, help="the recorded day: YYYY-MM-DD, today or yesterday (UTC)")
    parser.add_argument("--environment", type=str.upper, help="replay only this application environment")
    parser.add_argument(
        "--interval",
        type=interval_minutes,
        default=15,
        help="interval length in minutes (default 15, as the report's; whole-day rows always)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the replay's seed (default 0): the same seed, the same result")
    parser.add_argument(
        "--start-latency",
        dest="start_latencies",
        type=_seconds,
        action="append",
        help="a server's start latency in seconds; repeat it for a distribution to draw from (default: servers connect at once)",
    )
    parser.add_argument("--master", help="Spark master URL (default $WLM_SPARK_MASTER, else local[*])")
    parser.add_argument("--records", help="records URI (default <WLM_DATA_DIR>/records)")
    parser.add_argument("--output", type=Path, help="the result's JSON file (default <WLM_DATA_DIR>/what-if/<date>-<time>.json)")


def _environment_float(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


def add_manager_arguments(parser: argparse.ArgumentParser) -> None:
    """The manager's settings the replay runs with, as the job's own arguments: the records hold none."""
    defaults = ManagerSettings()
    for option, variable, default, what in (
        ("--goal-interval", "WLM_GOAL_INTERVAL_SECONDS", defaults.interval_s, "seconds between the manager's decisions"),
        ("--goal-window", "WLM_GOAL_WINDOW_SECONDS", defaults.window_s, "seconds of ended requests each decision reads"),
        ("--promotion-seconds", "WLM_BLOCKED_PROMOTION_SECONDS", defaults.promotion_s, "queued this long, work is promoted"),
        ("--promotion-share", "WLM_BLOCKED_PROMOTION_SHARE", defaults.promotion_share, "the share of selects promotion may take"),
    ):
        parser.add_argument(option, type=float, default=_environment_float(variable, default), help=f"{what} (default ${variable})")


def manager_from_arguments(args: argparse.Namespace) -> ManagerSettings:
    return ManagerSettings(args.goal_interval, args.goal_window, args.promotion_seconds, args.promotion_share)


def _local(uri: str) -> Path | None:
    """The path of a URI on a local disk; None for one elsewhere."""
    parsed = urlparse(uri)
    return Path(parsed.path) if parsed.scheme in ("", "file") else None


def day_has_records(records_uri: str, day: date) -> bool:
    """Whether the day's partition holds a records file; elsewhere than on a local disk, Spark will tell."""
    path = _local(day_path(records_uri, day))
    return path is None or any(path.glob("*.parquet"))


def recorded_days(records_uri: str, limit: int) -> list[date]:
    """The newest `limit` days whose partition holds a records file, newest first; none elsewhere than on a local
    disk (nothing lists them there)."""
    root = _local(records_uri)
    if root is None or not root.is_dir():
        return []
    days = (partition_day(entry.name) for entry in root.iterdir())
    return sorted((day for day in days if day is not None and day_has_records(records_uri, day)), reverse=True)[:limit]


def log_path(data_dir: Path, day: date) -> Path:
    return data_dir / "logs" / f"what-if-{day.isoformat()}.log"


def default_output(data_dir: Path, day: date) -> Path:
    return data_dir / "what-if" / f"{day.isoformat()}-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"


def run_from_arguments(
    args: argparse.Namespace, settings: JobSettings, candidate: dict[str, Any], manager: ManagerSettings
) -> WhatIfResult:
    """Replay the day under `candidate` (a definition the service checked); a day without records raises NoRecords,
    a failure JobFailed, whose message says why and names the log."""
    records_uri = args.records or str(settings.records_dir.resolve())
    if not day_has_records(records_uri, args.date):
        raise NoRecords(f"no_records: no work records of {args.date.isoformat()} in {day_path(records_uri, args.date)}")
    from spark_jobs.what_if.job import run  # PySpark is imported (and a JVM started) only to run

    with JobLog("what-if", log_path(settings.data_dir.resolve(), args.date)) as log:
        log.stage(f"details in {log.path}")
        return run(
            args.date,
            candidate=candidate,
            records_uri=records_uri,
            database_url=settings.database_url,
            output=(args.output or default_output(settings.data_dir, args.date)).resolve(),
            log=log,
            driver=replace(settings.driver, master=args.master) if args.master else settings.driver,
            environment=args.environment,
            seed=args.seed,
            interval_minutes=args.interval,
            settings=manager,
            start_latencies_s=tuple(args.start_latencies or ()),
        )
