"""The one place a SparkSession is built: entry points call it, transforms never do."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from py4j.protocol import Py4JJavaError
from pyspark import SparkConf, SparkContext
from pyspark.accumulators import AccumulatorTCPServer, AccumulatorUnixServer
from pyspark.errors import PySparkRuntimeError
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from spark_jobs.common.class_archive import ClassArchive
from spark_jobs.common.driver import DriverSettings
from spark_jobs.common.java_home import choose_java_home, describe, java_home_for_launch, java_home_on_path, java_version
from spark_jobs.common.job_log import JobLog

# Writing the class-data archive as the JVM exits took up to 40 s on 2 cores.
JVM_EXIT_TIMEOUT_S = 300
# How often the accumulator server is woken while it stops (stop_session).
ACCUMULATOR_WAKE_S = 0.005


def build_session(
    app_name: str,
    driver: DriverSettings,
    *,
    shuffle_partitions: int | None = None,
    driver_java_options: Sequence[str] = (),
    java_home: Path | None = None,
    jvm_output: TextIO | None = None,
) -> SparkSession:
    """A session on `driver.master`, every timestamp in UTC. `driver_java_options`, `java_home` and `jvm_output`
    take effect only when this call starts the driver's JVM, which runs on `java_home`, else on the Java
    java_home.py chooses, and writes its stdout and stderr to `jvm_output` (None: to this process's).

    Nothing is downloaded at run time: the job needs only the jars that ship in the pyspark wheel."""
    cores = os.cpu_count() or 2
    java_options = list(driver_java_options)
    options = {
        "spark.app.name": app_name,
        "spark.master": driver.master,
        "spark.sql.session.timeZone": "UTC",
        # Few, larger shuffle partitions: the report's shuffles are small after the first, and on a small
        # machine 200 tasks cost more in scheduling than they save; adaptive execution splits skew if any.
        "spark.sql.shuffle.partitions": str(shuffle_partitions or max(4, 2 * cores)),
        "spark.sql.adaptive.enabled": "true",
        # A day's files split into several tasks per core: packed into as few splits as there are cores, one
        # task took a third longer than the others and kept a core idle at the end of the read.
        "spark.sql.files.minPartitionNum": str(4 * cores),
        # The report's cells (group, interval, bucket, bin) are summed where the records are read; a task sees
        # more cells than the default fast map holds (2^16), and the rest went to the slower general map (a tenth
        # more CPU time on 10 million records).
        "spark.sql.codegen.aggregate.fastHashMap.capacityBit": "20",
        # The JVM's console progress bar is for a terminal the JVM owns: the job says its stages itself, and in
        # a log the bar is only carriage returns.
        "spark.ui.showConsoleProgress": "false",
    }
    if driver.master.startswith("local"):
        # The driver is the executor in local mode: give it the memory a day of records needs to aggregate, and
        # the throughput collector: G1's concurrent threads take a share of a small machine's cores (on two cores,
        # 10 million records took 40 s with G1 and 30 s with it).
        java_options.append("-XX:+UseParallelGC")
        # Python tasks (the what-if replay's) run on this interpreter, which has the job's packages: by default
        # Spark starts the `python3` on the PATH, which may have none of them. PySpark reads the variable, not the
        # `spark.pyspark.python` option, when it creates the context.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        options |= {"spark.driver.memory": driver.memory, "spark.ui.enabled": "false"}
    if java_options:
        options["spark.driver.extraJavaOptions"] = " ".join(java_options)
    builder = SparkSession.builder.config(map=options)  # type: ignore[arg-type]  # pyspark's dict of any option value takes no dict[str, str]
    if SparkContext._gateway is not None:
        return builder.getOrCreate()
    with java_home_for_launch(java_home or choose_java_home(driver.java_home, os.environ)):
        if jvm_output is not None:
            _start_jvm(options, jvm_output)
        return builder.getOrCreate()


def _start_jvm(options: Mapping[str, str], output: TextIO) -> None:
    """Start the driver's JVM with `options`, as the builder would, but with its stdout and stderr on `output` (a
    file): the builder's JVM inherits this process's, and prints its warnings and Spark's logging among the job's
    progress. A JVM that exits as it starts raises a RuntimeError with its last words."""
    output.flush()
    output_start = os.fstat(output.fileno()).st_size
    try:
        gateway = launch_gateway(SparkConf().setAll(list(options.items())), popen_kwargs={"stdout": output, "stderr": subprocess.STDOUT})
    except PySparkRuntimeError as error:
        # PySpark only says that it exited; why (no Java there, too little memory for the heap) is in its output.
        raise RuntimeError(f"the driver's JVM did not start: {' / '.join(_last_words(Path(output.name), output_start))}") from error
    SparkContext._ensure_initialized(gateway=gateway)


def _last_words(path: Path, start: int, count: int = 2) -> list[str]:
    """The last `count` lines the JVM wrote to `path` from `start` on: stack frames (indented) left out, and so are the
    job's own lines (it writes to the same file while the JVM starts: job_session)."""
    with path.open("rb") as written:
        written.seek(start)
        lines = written.read().decode(errors="replace").splitlines()
    return [line for line in lines if line.strip() and not line[0].isspace() and not JobLog.wrote(line)][-count:]


@contextmanager
def job_session(app_name: str, log: JobLog, driver: DriverSettings, *, may_write_archive: bool = True) -> Iterator[Future[SparkSession]]:
    """The session of one job run in this process, built on a thread of its own: the job reads what needs no Spark
    (the policy, the files' footers) while the driver's JVM starts (3 s of a 10 million record report's 18), and
    waits for the session with `result()`. If this call starts the driver's JVM, that JVM writes its output to
    `log`'s file and maps the class-data archive in `driver.class_archive_dir`, or writes it if there is none yet
    and `may_write_archive` (class_archive.py), and on exit it is stopped too (also after a failed start), so a newly
    written archive is complete before it is put in place. A run that reads no files should not write one: it never
    loads the readers every other run needs."""
    starts_jvm = SparkContext._gateway is None
    java_home = runs_on = None
    if starts_jvm:
        java_home = choose_java_home(driver.java_home, os.environ)
        runs_on = java_home or java_home_on_path()  # None chosen: Spark runs the `java` on the PATH
        if runs_on is not None:
            log.detail(describe(runs_on))
    archive = None
    if driver.class_archive_dir is not None and starts_jvm:
        archive = ClassArchive.for_directory(driver.class_archive_dir, runs_on)
        if archive.partial is not None and not may_write_archive:
            archive = None
    if archive is not None:
        log.detail(f"class-data archive {archive.path}: {'writing it at exit' if archive.partial else 'mapped'}")
    writes_archive = archive is not None and archive.partial is not None
    on_java = f" on Java {java_version(runs_on) or '(version unknown)'}" if runs_on is not None else ""
    first_run = " (first run: it also writes the JVM's class archive, up to a minute longer)" if writes_archive else ""
    log.stage(f"starting Spark{on_java}{first_run}")
    # JAVA_HOME is set here, before the session's thread starts, and kept until the JVM has stopped: changed while
    # another thread reads the environment (a database driver's connect), the C library may fail.
    with ThreadPoolExecutor(1, thread_name_prefix="spark-session") as starter, java_home_for_launch(java_home if starts_jvm else None):
        options = archive.java_options() if archive else ()
        starting = starter.submit(build_session, app_name, driver, driver_java_options=options, java_home=java_home, jvm_output=log.file)
        try:
            yield starting
        except Py4JJavaError as error:
            # Described now, while the JVM runs: the Java exception's message and stack trace are read from it.
            raise log.failed(error, reason=str(error.java_exception)) from error
        finally:
            try:
                # Waits for a start still under way: a JVM is never left starting while the job ends.
                not_started = starting.exception()
                if not_started is None:
                    stop_session(starting.result())
                else:  # in the log even where the job failed first and never asked for the session
                    log.detail(f"the session did not start: {not_started!r}")
            finally:
                if starts_jvm:
                    if writes_archive:
                        log.stage("writing the JVM's class archive for the next runs")
                    exit_code = stop_jvm()
                    if archive is not None and archive.publish(exit_code):
                        log.detail(f"class-data archive written: {archive.path}")


def stop_session(spark: SparkSession) -> None:
    """`spark.stop()` without waiting for PySpark's accumulator server's next poll (0.4–0.5 s seen, a thirtieth of
    a 10 million record report): the context is stopped first, as PySpark does, then the server (stop_accumulator_server)."""
    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    context._accumulatorServer = None  # type: ignore[assignment]  # PySpark's own: stopped below, not by SparkContext.stop
    try:
        spark.stop()
    finally:
        if server is not None:
            stop_accumulator_server(server)


def stop_accumulator_server(server: AccumulatorTCPServer | AccumulatorUnixServer) -> None:
    """Stop PySpark's accumulator server (which the report does not use) at once: it sees a shutdown only when its
    `serve_forever` polls again, every 0.5 s, and SparkContext.stop waits for that. It is told to stop and woken by
    connections it accepts and closes unread (its handler reads nothing once `server_shutdown` is set). While its
    handler serves the JVM's own connection (a job that ran Python tasks), that handler's poll, every second, still
    decides when it stops, as before: the wake-ups then wait at most ACCUMULATOR_WAKE_S each, not a full listen queue's
    retry."""
    server.server_shutdown = True
    stopping = threading.Thread(target=server.shutdown, name="accumulator-server-shutdown")
    stopping.start()
    while stopping.is_alive():
        # A wake-up before the shutdown is asked for only makes the server poll again: so, until it has ended.
        with contextlib.suppress(OSError), socket.socket(server.address_family) as wake:
            wake.settimeout(ACCUMULATOR_WAKE_S)
            wake.connect(server.server_address)
        stopping.join(ACCUMULATOR_WAKE_S)


def stop_jvm() -> int | None:
    """Stop the driver's JVM (it exits when its standard input closes) and return its exit code (None if it
    did not exit in time, or was not started by this process)."""
    gateway = SparkContext._gateway
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return None
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process.stdin is not None:
        process.stdin.close()
    try:
        return process.wait(timeout=JVM_EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return None
