"""The one place a SparkSession is built: entry points call it, transforms never do."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from app.config import get_settings
from spark_jobs.common.class_archive import ClassArchive
from spark_jobs.common.java_home import choose_java_home, describe, java_home_for_launch, java_home_on_path

# Writing the class-data archive as the JVM exits took up to 40 s on 2 cores.
JVM_EXIT_TIMEOUT_S = 300


def build_session(
    app_name: str,
    master: str | None = None,
    *,
    shuffle_partitions: int | None = None,
    driver_java_options: Sequence[str] = (),
    java_home: Path | None = None,
) -> SparkSession:
    """A session on `master` (else the setting WLM_SPARK_MASTER, local[*] by default), every timestamp in UTC.
    `driver_java_options` and `java_home` take effect only when this call starts the driver's JVM, which runs on
    `java_home`, else on the Java java_home.py chooses.

    Nothing is downloaded at run time: the job needs only the jars that ship in the pyspark wheel."""
    settings = get_settings()
    master = master or settings.spark_master
    cores = os.cpu_count() or 2
    java_options = list(driver_java_options)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.session.timeZone", "UTC")
        # Few, larger shuffle partitions: the report's shuffles are small after the first, and on a small
        # machine 200 tasks cost more in scheduling than they save; adaptive execution splits skew if any.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(4, 2 * cores)))
        .config("spark.sql.adaptive.enabled", "true")
        # A day's files split into several tasks per core: packed into as few splits as there are cores, one
        # task took a third longer than the others and kept a core idle at the end of the read.
        .config("spark.sql.files.minPartitionNum", str(4 * cores))
        # The report's cells (group, interval, bucket, bin) are summed where the records are read; a task sees
        # more cells than the default fast map holds (2^16), and the rest went to the slower general map (a tenth
        # more CPU time on 10 million records).
        .config("spark.sql.codegen.aggregate.fastHashMap.capacityBit", "20")
        .config("spark.ui.showConsoleProgress", "true")
    )
    if master.startswith("local"):
        # The driver is the executor in local mode: give it the memory a day of records needs to aggregate, and
        # the throughput collector: G1's concurrent threads take a share of a small machine's cores (on two cores,
        # 10 million records took 40 s with G1 and 30 s with it).
        java_options.append("-XX:+UseParallelGC")
        builder = builder.config("spark.driver.memory", settings.spark_driver_memory).config("spark.ui.enabled", "false")
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    if SparkContext._gateway is not None:
        return builder.getOrCreate()
    with java_home_for_launch(java_home or choose_java_home(settings.spark_java_home, os.environ)):
        return builder.getOrCreate()


@contextmanager
def job_session(
    app_name: str, master: str | None = None, progress: Callable[[str], None] = lambda _: None, *, may_write_archive: bool = True
) -> Iterator[SparkSession]:
    """The session of one job run in this process. If this call starts the driver's JVM, that JVM maps the
    class-data archive under the data directory, or writes it if there is none yet and `may_write_archive`
    (class_archive.py), and on exit it is stopped too, so a newly written archive is complete before it is put in
    place. A run that reads no files should not write one: it never loads the readers every other run needs."""
    settings = get_settings()
    starts_jvm = SparkContext._gateway is None
    java_home = runs_on = None
    if starts_jvm:
        java_home = choose_java_home(settings.spark_java_home, os.environ)
        runs_on = java_home or java_home_on_path()  # None chosen: Spark runs the `java` on the PATH
        if runs_on is not None:
            progress(describe(runs_on))
    archive = None
    if settings.spark_class_archive and starts_jvm:
        archive = ClassArchive.for_directory(settings.spark_class_archive_dir, runs_on)
        if archive.partial is not None and not may_write_archive:
            archive = None
    if archive is not None:
        progress(f"class-data archive {archive.path}: {'writing it at exit' if archive.partial else 'mapped'}")
    spark = build_session(app_name, master, driver_java_options=archive.java_options() if archive else (), java_home=java_home)
    try:
        yield spark
    finally:
        try:
            spark.stop()
        finally:
            if starts_jvm:
                exit_code = _stop_jvm()
                if archive is not None and archive.publish(exit_code):
                    progress(f"class-data archive written: {archive.path}")


def _stop_jvm() -> int | None:
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
