"""The one place a SparkSession is built: entry points call it, transforms never do."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def build_session(app_name: str, master: str | None = None, *, shuffle_partitions: int | None = None) -> SparkSession:
    """A session on `master` (else WLM_SPARK_MASTER, else local[*]) with every timestamp in UTC.

    Nothing is downloaded at run time: the job needs only the jars that ship in the pyspark wheel."""
    master = master or os.environ.get("WLM_SPARK_MASTER") or DEFAULT_MASTER
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
        # The driver is the executor in local mode: give it the memory a day of records needs to aggregate.
        builder = builder.config("spark.driver.memory", os.environ.get("WLM_SPARK_DRIVER_MEMORY", "4g")).config(
            "spark.ui.enabled", "false"
        )
    return builder.getOrCreate()
