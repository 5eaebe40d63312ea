"""`wlm report run|schedule`: the nightly workload activity report (spark_jobs/workload_activity), run with the
service's settings, and the cron line that runs it every night."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from app.cli.errors import CliError
from app.config import Settings, get_settings
from spark_jobs.common.driver import DriverSettings
from spark_jobs.common.job_log import JobFailed
from spark_jobs.workload_activity.arguments import JobSettings, run_from_arguments


def job_settings(settings: Settings) -> JobSettings:
    """What the job takes from the service's settings: where its data and database are, how the driver runs."""
    return JobSettings(
        database_url=settings.resolved_database_url,
        data_dir=settings.data_dir,
        records_dir=settings.records_dir,
        delay_samples_dir=settings.delay_samples_dir,
        driver=DriverSettings(
            master=settings.spark_master,
            memory=settings.spark_driver_memory,
            java_home=settings.spark_java_home,
            class_archive_dir=settings.spark_class_archive_dir if settings.spark_class_archive else None,
        ),
    )


def cmd_report(args: argparse.Namespace) -> None:
    if args.action == "run":
        # PySpark is the service's `report` extra: the API's image and an install without the extra lack it.
        if importlib.util.find_spec("pyspark") is None:
            raise CliError(
                "wlm report run needs PySpark, the service's `report` extra, which is not installed here: "
                "`pip install -e '.[report]'` in the service's checkout (make does), or run the report's image"
            )
        try:
            run_from_arguments(args, job_settings(get_settings()))
        except JobFailed as failure:
            raise CliError(str(failure)) from None
        return
    hour, minute = args.at
    wlm = Path(sys.executable).with_name("wlm")
    data_dir = get_settings().data_dir.resolve()
    log = data_dir / "reports" / "workload_activity.log"
    print("# The nightly workload activity report of the day before (UTC). Add with `crontab -e`:")
    print(f"{minute} {hour} * * * cd {Path.cwd()} && WLM_DATA_DIR={data_dir} {wlm} report run --date yesterday >> {log} 2>&1")


def time_of_day(text: str) -> tuple[int, int]:
    try:
        hour, minute = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time of day (HH:MM): {text!r}") from None
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise argparse.ArgumentTypeError(f"not a time of day (HH:MM): {text!r}")
    return hour, minute
