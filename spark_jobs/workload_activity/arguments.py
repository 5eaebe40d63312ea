"""The job's command line, shared by `python -m spark_jobs.workload_activity` and `wlm report run` (without
importing PySpark: every `wlm` command builds this parser).

A run's own choices (date, interval, master, records, output) are arguments of both. Where the service keeps its
data and database, and how the driver runs, are JobSettings: `wlm report run` fills them from the service's
settings, the job's own command line from its arguments (add_settings_arguments), which default to the service's
environment variables of the same settings."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from spark_jobs.common.driver import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER, DriverSettings
from spark_jobs.common.java_home import CONFIGURED_JAVA_HOME_VARIABLE
from spark_jobs.common.job_log import JobLog
from spark_jobs.contract.records import day_has_files
from spark_jobs.contract.report import divides_the_day


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What a run needs besides its own choices."""

    database_url: str
    # The runs' logs are under it, and the report's Parquet unless --output names another place.
    data_dir: Path
    # Where the service writes the work records (read unless --records names another place).
    records_dir: Path
    # Where the elected scheduler writes the delay samples (read unless --delay-samples names another place).
    delay_samples_dir: Path
    driver: DriverSettings


def report_date(text: str) -> date:
    """YYYY-MM-DD, or `today` / `yesterday` (UTC, the records' partitioning)."""
    today = datetime.now(UTC).date()
    named = {"today": today, "yesterday": today - timedelta(days=1)}
    if text in named:
        return named[text]
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD, today or yesterday): {text!r}") from None


def interval_minutes(text: str) -> int:
    try:
        minutes = int(text)
    except ValueError:
        minutes = 0
    if not divides_the_day(minutes):
        raise argparse.ArgumentTypeError(f"an interval must be a whole number of minutes that divides a day: {text!r}")
    return minutes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--date", type=report_date, required=True, help="YYYY-MM-DD, today or yesterday (UTC)")
    parser.add_argument("--master", help="Spark master URL (default $WLM_SPARK_MASTER, else local[*])")
    parser.add_argument(
        "--interval", type=interval_minutes, default=15, help="interval length in minutes (default 15; whole-day rows always)"
    )
    parser.add_argument("--records", help="records URI (default <WLM_DATA_DIR>/records)")
    parser.add_argument("--delay-samples", help="delay samples URI (default <WLM_DATA_DIR>/delay_samples)")
    parser.add_argument(
        "--output",
        help="where the report's Parquet goes: a path (written by the driver) or a URI such as hdfs:// or s3a:// (by Spark's"
        " writer); default <WLM_DATA_DIR>/reports/workload_activity",
    )


def _environment(name: str) -> str | None:
    """The service's environment variable `name`; set but empty is unset, as the service reads it."""
    return os.environ.get(name) or None


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """What `wlm report run` takes from the service's settings, as the job's own arguments."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(_environment("WLM_DATA_DIR") or "data"),
        help="the service's data directory (default $WLM_DATA_DIR, else data)",
    )
    parser.add_argument(
        "--database-url",
        default=_environment("WLM_DATABASE_URL"),
        help="the service's database (default $WLM_DATABASE_URL, else <data-dir>/wlm.db)",
    )
    parser.add_argument(
        "--driver-memory",
        default=_environment("WLM_SPARK_DRIVER_MEMORY") or DEFAULT_DRIVER_MEMORY,
        help=f"the driver's memory in local mode (default $WLM_SPARK_DRIVER_MEMORY, else {DEFAULT_DRIVER_MEMORY})",
    )
    parser.add_argument(
        "--java-home",
        type=Path,
        default=_environment(CONFIGURED_JAVA_HOME_VARIABLE),
        help="the driver's Java (default $WLM_SPARK_JAVA_HOME, else $JAVA_HOME, else the newest installed Java Spark supports)",
    )
    parser.add_argument("--no-class-archive", action="store_true", help="the driver's JVM maps no class-data archive (<data-dir>/spark)")


def settings_from_arguments(args: argparse.Namespace) -> JobSettings:
    """The settings of the job's own command line (--master is a run's choice; its default is the environment's)."""
    data_dir: Path = args.data_dir
    return JobSettings(
        # The service's own default: SQLite in its data directory.
        database_url=args.database_url or f"sqlite:///{(data_dir / 'wlm.db').resolve()}",
        data_dir=data_dir,
        records_dir=data_dir / "records",
        delay_samples_dir=data_dir / "delay_samples",
        driver=DriverSettings(
            master=_environment("WLM_SPARK_MASTER") or DEFAULT_MASTER,
            memory=args.driver_memory,
            java_home=args.java_home,
            class_archive_dir=None if args.no_class_archive else data_dir / "spark",
        ),
    )


def log_path(data_dir: Path, report_date: date) -> Path:
    """The log of the runs for `report_date`: each stage's details, the driver JVM's output, a failure's traceback."""
    return data_dir / "logs" / f"report-{report_date.isoformat()}.log"


def run_from_arguments(args: argparse.Namespace, settings: JobSettings) -> None:
    """Run the report and print its summary; a failure raises JobFailed, whose message says why and names the log."""
    # PySpark is imported, and a JVM started, only to run.
    from spark_jobs.common.session import job_session

    records_uri = args.records or str(settings.records_dir.resolve())
    driver = replace(settings.driver, master=args.master) if args.master else settings.driver
    with JobLog("workload-activity", log_path(settings.data_dir.resolve(), args.date)) as log:
        # Named first, so that a run that hangs or is killed has said where to look.
        log.stage(f"details in {log.path}")
        with job_session("wlm-workload-activity", log, driver, may_write_archive=day_has_files(records_uri, args.date)) as session:
            # Imported while the JVM starts: the job's modules take 0.4 s (pyarrow.dataset, SQLAlchemy, PySpark SQL).
            from spark_jobs.workload_activity.job import run

            result = run(
                args.date,
                session=session,
                records_uri=records_uri,
                output_uri=args.output or str((settings.data_dir / "reports" / "workload_activity").resolve()),
                database_url=settings.database_url,
                log=log,
                interval_minutes=args.interval,
                delay_samples_uri=args.delay_samples or str(settings.delay_samples_dir.resolve()),
            )
        seconds = time.monotonic() - log.started
    print(f"workload activity report {result.report_date}: {result.rows} rows, {result.ended} ended requests, {seconds:.1f} s")
