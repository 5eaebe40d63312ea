"""The job's command line, shared by `python -m spark_jobs.workload_activity` and `wlm report run` (without
importing PySpark: every `wlm` command builds this parser)."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta

from app.config import get_settings
from app.reports.models import divides_the_day


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


def run_from_arguments(args: argparse.Namespace) -> None:
    from spark_jobs.workload_activity.job import run  # PySpark is imported (and a JVM started) only to run

    settings = get_settings()
    result = run(
        args.date,
        records_uri=args.records or str(settings.records_dir.resolve()),
        output_uri=args.output or str((settings.data_dir / "reports" / "workload_activity").resolve()),
        database_url=settings.resolved_database_url,
        master=args.master,
        interval_minutes=args.interval,
    )
    print(f"workload activity report {result.report_date}: {result.rows} rows, {result.ended} ended requests, {result.seconds:.1f} s")
