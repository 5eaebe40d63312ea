"""The nightly report of several days in one process and one JVM, each run as `wlm report run --date DAY` runs it (the
command's parsing, the service's settings from the environment, the job), for bench/report.py's smoke run: a JVM
started without a class-data archive took 10 s of a 25 s smoke run quiet, and 25 s under load, for each day.

    python bench/_report_days.py DAY [DAY ...]

The JVM is started here, as the job would start it, and kept for every day's run (a run stops only a JVM it started);
its output goes to <data dir>/logs/bench-report-days-jvm.log. One JSON line per day on stdout: `date`, `seconds` (the
first day's include the JVM's start), `summary` (the job's summary line), `java`. The driver maps no class-data
archive here: set WLM_SPARK_CLASS_ARCHIVE=false. Its JIT is the client compiler only, as bench/_in_process.py's."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from _smoke import SMOKE_JAVA_OPTIONS  # noqa: E402

from app.cli import build_parser  # noqa: E402
from app.cli.report import cmd_report, job_settings  # noqa: E402
from app.config import get_settings  # noqa: E402
from spark_jobs.common.java_home import choose_java_home, java_home_on_path, java_version  # noqa: E402
from spark_jobs.common.session import build_session, stop_jvm  # noqa: E402


def main(days: list[str]) -> None:
    settings = job_settings(get_settings())
    if settings.driver.class_archive_dir is not None:
        sys.exit("bench/_report_days.py: the driver maps no class-data archive here: set WLM_SPARK_CLASS_ARCHIVE=false")
    java_home = choose_java_home(settings.driver.java_home, os.environ)
    runs_on = java_home or java_home_on_path()
    java = (java_version(runs_on) if runs_on else None) or "on the PATH"
    log = settings.data_dir.resolve() / "logs" / "bench-report-days-jvm.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    parser = build_parser()
    try:
        with log.open("a", buffering=1, encoding="utf-8") as jvm_output:
            started = time.perf_counter()
            build_session(
                "wlm-workload-activity", settings.driver, java_home=java_home, jvm_output=jvm_output, driver_java_options=SMOKE_JAVA_OPTIONS
            )
            for day in days:
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    cmd_report(parser.parse_args(["report", "run", "--date", day]))
                summary = printed.getvalue().strip().splitlines()[-1]
                print(json.dumps({"date": day, "seconds": time.perf_counter() - started, "summary": summary, "java": java}), flush=True)
                started = time.perf_counter()
    finally:
        stop_jvm()


if __name__ == "__main__":
    main(sys.argv[1:])
