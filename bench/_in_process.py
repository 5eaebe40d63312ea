"""A benchmark's Spark jobs run in its own process, all on one JVM (`--smoke`: a JVM starts in 10-20 s on a small
machine, and a smoke run of bench/whatif.py would start four): `wlm whatif` and `wlm report run` as their commands
run them, from the same settings and arguments, each job's session a new one on the JVM `one_jvm` started."""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from datetime import date
from pathlib import Path
from typing import Any

from _smoke import SMOKE_JAVA_OPTIONS

from app.cli.report import job_settings
from app.cli.whatif import manager_settings, read_candidate
from app.config import Settings


@contextmanager
def one_jvm() -> Iterator[None]:
    """The JVM the jobs run on while in this context: a job whose session finds one running leaves it running."""
    from spark_jobs.common.driver import DriverSettings
    from spark_jobs.common.session import build_session

    spark = build_session("wlm-bench", DriverSettings(master="local[*]"), driver_java_options=SMOKE_JAVA_OPTIONS)
    try:
        yield
    finally:
        spark.stop()  # the JVM itself ends with this process


def service_settings(data_dir: Path, settings: Mapping[str, str]) -> Settings:
    """The settings of a service of `data_dir` given `settings` (WLM_*), none of this process's environment's."""
    inherited = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("WLM_")}
    try:
        given: dict[str, Any] = {name.removeprefix("WLM_").lower(): value for name, value in settings.items()}
        return Settings(data_dir=data_dir, **given)
    finally:
        os.environ.update(inherited)


def whatif(data_dir: Path, day: date, candidate: Path, settings: Mapping[str, str], *extra: str) -> tuple[float, dict[str, Any], str]:
    """`wlm whatif` on the day: its wall time, its JSON result and its log's lines of this run."""
    from spark_jobs.what_if.arguments import add_arguments, log_path, run_from_arguments

    service = service_settings(data_dir, settings)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    output = data_dir / "what-if" / f"bench-{candidate.stem}.json"
    args = parser.parse_args(["--date", day.isoformat(), "--output", str(output), *extra])
    log = log_path(data_dir.resolve(), day)
    before = log.stat().st_size if log.exists() else 0
    started = time.perf_counter()
    run = run_from_arguments(args, job_settings(service), read_candidate(candidate, service), manager_settings(service))
    elapsed = time.perf_counter() - started
    return elapsed, run.result, log.read_bytes()[before:].decode()


def report(data_dir: Path, day: date, settings: Mapping[str, str]) -> tuple[float, str, str]:
    """`wlm report run` on the day: its wall time, its summary line and the Java it ran on."""
    from spark_jobs.workload_activity.arguments import add_arguments, run_from_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--date", day.isoformat()])
    printed = io.StringIO()
    started = time.perf_counter()
    with redirect_stdout(printed):
        run_from_arguments(args, job_settings(service_settings(data_dir, settings)))
    return time.perf_counter() - started, printed.getvalue().strip().splitlines()[-1], "the benchmark's own JVM"
