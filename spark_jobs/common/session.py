"""The one place a SparkSession is built: entry points call it, transforms never do."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from app.config import get_settings


def build_session(app_name: str, master: str | None = None, *, shuffle_partitions: int | None = None) -> SparkSession:
    """A session on `master` (else the setting WLM_SPARK_MASTER, local[*] by default), every timestamp in UTC.

    Nothing is downloaded at run time: the job needs only the jars that ship in the pyspark wheel."""
    settings = get_settings()
    master = master or settings.spark_master
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.session.timeZone", "UTC")
        # Few, larger shuffle partitions: the report's shuffles are small after the first, and on a small
        # machine 200 tasks cost more in scheduling than they save; adaptive execution splits skew if any.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(4, 2 * cores)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.ui.showConsoleProgress", "true")
    )
    if master.startswith("local"):
        # The driver is the executor in local mode: give it the memory a day of records needs to aggregate, and
        # the throughput collector: G1's concurrent threads take a share of a small machine's cores (on two cores,
        # 10 million records took 40 s with G1 and 30 s with it).
        builder = (
            builder.config("spark.driver.memory", settings.spark_driver_memory)
            .config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
            .config("spark.ui.enabled", "false")
        )
    return builder.getOrCreate()
