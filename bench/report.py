"""The nightly workload activity report on a day of 10 and of 20 million synthetic work records, against DuckDB.

    .venv/bin/python bench/report.py [--millions 10 20] [--runs 3] [--keep-data]
    .venv/bin/python bench/report.py --smoke     # days of a few thousand records, one run: seconds

Starts the real service once to install the example policy (examples/policy.yaml) into a scratch SQLite database, stops
it, writes each day of records (bench/_report_data.py: the records' schema and layout, 0.5% of them twice) and of delay
samples (bench/_delay_data.py), then times `wlm report run --date ...` as a process of its own: wall time from its
start to its exit, the JVM's start, reading the policy, Parquet and the database upsert included. The job's first run
on a machine writes the driver JVM's class-data archive (spark_jobs/common/class_archive.py) as its JVM exits; the
benchmark makes that first run on a day of 10,000 records, times it apart, and the timed days then map the archive, as
every nightly run after the first does. The job runs on the Java it chooses (JAVA_HOME if the benchmark is given one,
else the newest installed Java Spark supports: spark_jobs/common/java_home.py); the JSON names it. The generated files
are flushed to disk before the timed runs. DuckDB, the single-machine yardstick, computes the same report of the small
day in the same run: copies dropped by token and life, the goal of each class period, per AE, node, class, period,
report class and 15 minutes and for the whole day: counts, mean and standard deviation of response, queue and execution
time, exact percentiles, the 14 buckets against the goal, velocity; and the delay columns, from the day's delay samples
(bench/_delay_data.py: a file per hour, as a finished day lies once the scheduler has merged its minute files,
some written twice, a failover's gap): copies dropped by the contract's key, each state's percentage per class queue
and 15 minutes and for the day. Each of the `--runs` rounds runs the small day, the large day and DuckDB in turn; the
figures are the medians. The benchmark fails
(exit status 1) unless every run of a day counts the same ended requests, Spark and DuckDB count the same on the small
day, every row of the job's small-day report has the delay columns DuckDB computes for its class queue and interval
(the `delays_agree` check; `delay_rows_compared` rows), and every figure is above 0. The last line is one JSON object
of the figures.

`--smoke` takes the same steps on days of a few thousand requests, one round, without the class-data archive (writing
it takes longer than the rest of the smoke run): there is no separate first run, and the first timed run is reported as
the first run. Its two days run in one process and one JVM (bench/_report_days.py: each as `wlm report run` runs it),
the first day's time with the JVM's start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import httpx
import yaml

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: bench/ab.py's commit

from bench import _delay_data  # noqa: E402
from bench._duckdb_report import delay_query, report_query  # noqa: E402
from bench._report_data import MissingValueRule, check_value_rules, generate  # noqa: E402
from bench._service import ADMIN_KEY, ROOT, WLM, Service, machine  # noqa: E402
from spark_jobs.workload_activity.delays import DELAY_COLUMNS, QUEUE  # noqa: E402
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo, goal_rows  # noqa: E402

# The figures of the last line that say how the report did (tests/bench/test_smoke.py checks for them).
HEADLINE = (
    "spark_small_s",
    "spark_large_s",
    "duckdb_small_s",
    "spark_over_duckdb",
    "duckdb_job_s",
    "spark_over_duckdb_job",
    "growth_large_over_small",
    "first_run_s",
    "delay_rows_compared",
)
SMALL_DAY, LARGE_DAY = date(2026, 11, 1), date(2026, 11, 2)
WARM_UP_DAY, WARM_UP_REQUESTS = date(2026, 10, 31), 10_000
SMOKE_REQUESTS = (2_000, 4_000)
ENDED = re.compile(r"(\d+) ended requests")


def install_policy(directory: Path | None = None) -> Service:
    """A stopped service whose data directory's database holds the example policy, installed through the API;
    `directory`: the service's own (None: a scratch directory removed when the benchmark ends)."""
    service = Service(directory=directory)
    try:
        response = httpx.put(
            f"{service.url}/v1/policy",
            content=(ROOT / "examples" / "policy.yaml").read_bytes(),
            headers={"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/yaml"},
            timeout=30,
        )
        response.raise_for_status()
    finally:
        service.stop()
    return service


def _environment(data_dir: Path, settings: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WLM_")} | {"WLM_DATA_DIR": str(data_dir), **settings}


def _ran(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        raise RuntimeError(f"the report failed:\n{result.stderr[-3000:]}")
    return result


def run_report(data_dir: Path, day: date, settings: dict[str, str]) -> tuple[float, str, str]:
    """The job's wall time, its summary line and the Java it ran on (spark_jobs/common/java_home.py chooses);
    `settings`: the service's settings (WLM_*) besides its data directory."""
    started = time.perf_counter()
    command = [WLM, "report", "run", "--date", day.isoformat()]
    result = _ran(subprocess.run(command, env=_environment(data_dir, settings), capture_output=True, text=True))
    elapsed = time.perf_counter() - started
    java = re.search(r"starting Spark on Java (\S+)", result.stderr)
    return elapsed, result.stdout.strip().splitlines()[-1], java.group(1) if java else "on the PATH"


def run_reports(data_dir: Path, days: list[date], settings: dict[str, str], *, one_jvm: bool) -> dict[date, tuple[float, str, str]]:
    """`run_report` of each of `days` in turn, or (`one_jvm`, the smoke run's) all of them in one process and one JVM
    (bench/_report_days.py: each day as `wlm report run` runs it; the first day's time carries the JVM's start)."""
    if not one_jvm:
        return {day: run_report(data_dir, day, settings) for day in days}
    command = [sys.executable, str(ROOT / "bench" / "_report_days.py"), *(day.isoformat() for day in days)]
    result = _ran(subprocess.run(command, env=_environment(data_dir, settings), capture_output=True, text=True))
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {date.fromisoformat(line["date"]): (line["seconds"], line["summary"], line["java"]) for line in lines}


# The figures agree to this relative difference (sums of the same integers, divided in double precision).
DELAY_TOLERANCE = 1e-9


def duckdb_report(records: Path, samples: Path) -> tuple[float, int, dict[tuple[object, ...], tuple[object, ...]]]:
    """The same report in DuckDB, on every core; returns its wall time, the whole day's ended count and the delay
    columns (DELAY_COLUMNS) by class queue and level (QUEUE, interval minutes, interval start)."""
    policy = PolicyVersionInfo(1, datetime.now(UTC), yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text()))
    query = report_query(goal_rows([policy]), records)
    connection = duckdb.connect()
    started = time.perf_counter()
    rows = connection.execute(query).fetchall()
    delays = connection.execute(delay_query(samples)).fetchall()
    elapsed = time.perf_counter() - started
    connection.close()
    key_length = len(QUEUE) + 2
    return elapsed, sum(row[6] for row in rows if row[5] is None), {row[:key_length]: row[key_length:] for row in delays}


def duckdb_job(data_dir: Path, day: date) -> tuple[float, int]:
    """The same day's report as a DuckDB job of its own (bench/_duckdb_job.py: the policy read, the same queries, the
    report's Parquet written and its rows replaced in a scratch copy of the service's database), timed as the job
    is: wall time from its process's start to its exit. Returns that and the whole day's ended count."""
    scratch = data_dir / "duckdb-job.db"
    if not scratch.exists():
        shutil.copyfile(data_dir / "wlm.db", scratch)
    partition = f"date={day.isoformat()}"
    command = [
        sys.executable,
        str(ROOT / "bench" / "_duckdb_job.py"),
        f"--date={day.isoformat()}",
        f"--records={data_dir / 'records' / partition}",
        f"--samples={data_dir / 'delay_samples' / partition}",
        f"--database-url=sqlite:///{scratch}",
        f"--output={data_dir / 'reports' / 'duckdb_job'}",
    ]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"the DuckDB job failed:\n{result.stderr[-3000:]}")
    return elapsed, json.loads(result.stdout.strip().splitlines()[-1])["ended"]


def delays_agree(report: Path, duck: dict[tuple[object, ...], tuple[object, ...]]) -> tuple[int, list[str]]:
    """The delays_agree check: each row of the job's report (its Parquet, `report`) has the delay columns DuckDB
    computed for its class queue and level. Returns the rows compared and what disagrees (the first few)."""
    columns = ", ".join((*QUEUE, "interval_minutes", "interval_start", *DELAY_COLUMNS))
    rows = duckdb.sql(f"SELECT {columns} FROM read_parquet('{report}/*.parquet')").fetchall()
    key_length = len(QUEUE) + 2
    problems = []
    for row in rows:
        key, figures = row[:key_length], row[key_length:]
        expected = duck.get(key, (None,) * len(DELAY_COLUMNS))
        if not all(_same(mine, theirs) for mine, theirs in zip(figures, expected, strict=True)):
            problems.append(f"delays_agree: {key}: the job has {figures}, DuckDB {expected}")
    return len(rows), problems[:5]


def _same(mine: object, theirs: object) -> bool:
    if mine is None or theirs is None:
        return mine is theirs
    assert isinstance(mine, int | float) and isinstance(theirs, int | float)
    return abs(mine - theirs) <= DELAY_TOLERANCE * max(abs(mine), abs(theirs), 1.0)


def ended_count(summary: str) -> int:
    found = ENDED.search(summary)
    if found is None:
        raise RuntimeError(f"no count of ended requests in the job's summary: {summary!r}")
    return int(found.group(1))


def check(figures: dict[str, float], spark_ended: dict[str, set[int]], duck_ended: set[int], delay_problems: list[str]) -> list[str]:
    """What is wrong with a run's results: counts that differ (both engines dropped the copies, each its own way),
    delay columns that differ (`delays_agree`), or a figure not above 0."""
    problems = [
        f"the {size} day's runs counted {sorted(counts)} ended requests" for size, counts in spark_ended.items() if len(counts) != 1
    ]
    if spark_ended["small"] != duck_ended:
        problems.append(f"the job counted {sorted(spark_ended['small'])} ended requests on the small day, DuckDB {sorted(duck_ended)}")
    problems += delay_problems
    problems += [f"{name} is {figures[name]}, not above 0" for name in HEADLINE if not figures[name] > 0]
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=int, nargs=2, default=(10, 20), metavar=("SMALL", "LARGE"), help="the two day sizes")
    parser.add_argument("--runs", type=int, default=3, help="rounds of the two days and DuckDB; the figures are their medians (default 3)")
    parser.add_argument("--smoke", action="store_true", help="days of a few thousand requests, one round: the same steps in seconds")
    parser.add_argument("--keep-data", action="store_true", help="keep the scratch directory of the records (else removed at the end)")
    args = parser.parse_args()
    try:
        # Before anything starts: a column of a contract the generators cannot fill.
        check_value_rules()
        _delay_data.check_rules()
    except MissingValueRule as error:
        sys.exit(str(error))
    requests = dict(zip(("small", "large"), SMOKE_REQUESTS if args.smoke else (m * 1_000_000 for m in args.millions), strict=True))
    runs = 1 if args.smoke else args.runs
    # The smoke run maps no class-data archive: writing one at the first JVM's exit takes longer than the rest.
    settings = {"WLM_SPARK_CLASS_ARCHIVE": "false"} if args.smoke else {}
    print(f"machine: {machine()}; the job, its JVM and this process share the cores", flush=True)
    # A kept directory is one the service did not make: it removes its own scratch directory at exit.
    service = install_policy(Path(tempfile.mkdtemp(prefix="wlm-report-data-")) if args.keep_data else None)
    try:
        figures = measure(service.dir / "data", requests, runs, settings, warm_up=not args.smoke)
    finally:
        if args.keep_data:
            print(f"the records and the service's database are kept in {service.dir / 'data'}", flush=True)
        else:
            shutil.rmtree(service.dir, ignore_errors=True)
    print(json.dumps(figures | {"smoke": args.smoke}))


def measure(data_dir: Path, requests: dict[str, int], runs: int, settings: dict[str, str], *, warm_up: bool) -> dict[str, object]:
    """Generate the days, run the job and DuckDB on them, and return the figures; exits with status 1 if a check fails."""
    days = {"small": SMALL_DAY, "large": LARGE_DAY}
    for size, day in days.items():
        started = time.perf_counter()
        rows = generate(data_dir / "records", day, requests[size])
        samples = _delay_data.generate(data_dir / "delay_samples", day)
        print(f"{day}: {rows:,} records and {samples:,} delay sample rows written in {time.perf_counter() - started:.1f} s", flush=True)
    first_run = None
    if warm_up:
        generate(data_dir / "records", WARM_UP_DAY, WARM_UP_REQUESTS)
    os.sync()  # the nightly job reads files written during the day, long on disk: no writeback during the runs
    if warm_up:
        first_run, summary, _ = run_report(data_dir, WARM_UP_DAY, settings)
        print(
            f"first run, on a day of {WARM_UP_REQUESTS:,} requests (writes the class-data archive): {first_run:.1f} s wall ({summary})",
            flush=True,
        )
    seconds: dict[str, list[float]] = {"small": [], "large": [], "duckdb": [], "duckdb_job": []}
    spark_ended: dict[str, set[int]] = {"small": set(), "large": set()}
    duck_ended: set[int] = set()
    duck_delays: dict[tuple[object, ...], tuple[object, ...]] = {}
    java = ""
    for run in range(1, runs + 1):
        timed = run_reports(data_dir, list(days.values()), settings, one_jvm=not warm_up)
        for size, day in days.items():
            elapsed, summary, java = timed[day]
            print(f"run {run}: spark {size} day ({requests[size]:,} requests): {elapsed:.1f} s wall ({summary})", flush=True)
            seconds[size].append(elapsed)
            spark_ended[size].add(ended_count(summary))
        partition = f"date={SMALL_DAY.isoformat()}"
        elapsed, ended, duck_delays = duckdb_report(data_dir / "records" / partition, data_dir / "delay_samples" / partition)
        print(f"run {run}: duckdb small day: {elapsed:.1f} s ({ended:,} ended requests)", flush=True)
        seconds["duckdb"].append(elapsed)
        duck_ended.add(ended)
        elapsed, ended = duckdb_job(data_dir, SMALL_DAY)
        print(f"run {run}: duckdb job, small day: {elapsed:.1f} s ({ended:,} ended requests)", flush=True)
        seconds["duckdb_job"].append(elapsed)
        duck_ended.add(ended)
    print(f"the job's driver runs on Java {java}", flush=True)
    small, large, duck, duck_job = (statistics.median(seconds[name]) for name in ("small", "large", "duckdb", "duckdb_job"))
    # The small day's report as the job wrote it last (its Parquet), against DuckDB's delay columns.
    delay_rows, delay_problems = delays_agree(data_dir / "reports" / "workload_activity" / f"date={SMALL_DAY.isoformat()}", duck_delays)
    print(f"delays_agree: {delay_rows:,} report rows compared, {len(delay_problems)} disagreeing shown", flush=True)
    figures = {
        "spark_small_s": round(small, 1),
        "spark_large_s": round(large, 1),
        "duckdb_small_s": round(duck, 3),  # milliseconds on a smoke run's day
        "spark_over_duckdb": round(small / duck, 2),
        # Like for like: DuckDB as a job of its own, process start, policy read and writes included, as the job's are.
        "duckdb_job_s": round(duck_job, 3),
        "spark_over_duckdb_job": round(small / duck_job, 2),
        "growth_large_over_small": round(large / small, 2),
        "first_run_s": round(first_run if first_run is not None else seconds["small"][0], 1),
        "delay_rows_compared": delay_rows,
    }
    problems = check(figures, spark_ended, duck_ended, delay_problems)
    if problems:
        sys.exit("bench/report.py: " + "; ".join(problems))
    runs_of = {
        f"{name}_runs_s": [round(value, 3 if name.startswith("duckdb") else 1) for value in values] for name, values in seconds.items()
    }
    return figures | runs_of | {"small_requests": requests["small"], "large_requests": requests["large"], "runs": runs, "java": java}


if __name__ == "__main__":
    main()
