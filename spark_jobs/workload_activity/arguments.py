"""The job's command line, shared by `python -m spark_jobs.workload_activity` and `wlm report run` (without
importing PySpark: every `wlm` command builds this parser)."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from app.config import get_settings
from app.reports.models import divides_the_day
from spark_jobs.common.job_log import JobLog


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
    parser.add_argument("--interval", type=interval_minutes, default=15, help="interval length in minutes (default 15; whole-day rows always)")
    parser.add_argument("--records", help="records URI (default <WLM_DATA_DIR>/records)")
    parser.add_argument("--output", help="report Parquet URI (default <WLM_DATA_DIR>/reports/workload_activity)")


def log_path(data_dir: Path, report_date: date) -> Path:
    """The log of the runs for `report_date`: each stage's details, the driver JVM's output, a failure's traceback."""
    return data_dir / "logs" / f"report-{report_date.isoformat()}.log"


def run_from_arguments(args: argparse.Namespace) -> None:
    """Run the report and print its summary; a failure raises JobFailed, whose message says why and names the log."""
    from spark_jobs.workload_activity.job import run  # PySpark is imported (and a JVM started) only to run

    settings = get_settings()
    with JobLog("workload-activity", log_path(settings.data_dir.resolve(), args.date)) as log:
        # Named first, so that a run that hangs or is killed has said where to look.
        log.stage(f"details in {log.path}")
        result = run(
            args.date,
            records_uri=args.records or str(settings.records_dir.resolve()),
            output_uri=args.output or str((settings.data_dir / "reports" / "workload_activity").resolve()),
            database_url=settings.resolved_database_url,
            log=log,
            master=args.master,
            interval_minutes=args.interval,
        )
    print(f"workload activity report {result.report_date}: {result.rows} rows, {result.ended} ended requests, {result.seconds:.1f} s")
