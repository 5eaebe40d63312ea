"""The report's using and delay columns, as RMF's workload activity report has them: of a day's delay samples
(spark_jobs/contract/delay_samples.py), copies dropped by DEDUP_KEY, the states counted per class queue (AE, node,
class, period) summed per interval and for the day, each state as a percentage of all the states counted.

A scheduler failover's gap is fewer `samples`, never zeros: the percentages are of the states that were counted. The
samples are of the class queue, not of a report class or a policy version: every report row of a class period
(each of its report classes, each version) gets its queue's figures. A day without samples, or an interval without
a row of them, has nulls; an interval sampled while the queue held no request has its samples and null percentages.

The samples are rows per queue per minute, in a file per minute: few rows, many files. They are summed on the driver
(`delay_sums`, Arrow), while the JVM starts, to a row per class queue and level, and those rows joined onto the
report's as a table Spark knows whole (a local relation, broadcast). Read by Spark, the day's 1,440 files took three
jobs and six stages more, and seconds; as an inline table of bound parameters (tables.py), 2,000 rows took a minute
to plan."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.contract.delay_samples import DEDUP_KEY, STATE_COLUMNS
from spark_jobs.contract.report import WHOLE_DAY_MINUTES

# What the job reads of a sample row.
SAMPLE_COLUMNS = (*DEDUP_KEY, "samples", *STATE_COLUMNS)
# A class queue's names: what the samples and the report rows share.
QUEUE = ("application_environment", "node", "service_class", "period")
# The report's columns of the samples, in the order of the `workload_reports` table: the samples (ticks at which the
# queue was sampled, summed) and each state's percentage ("using", "delay_<cause>", "unknown").
STATE_PCT_COLUMNS = tuple(f"{state}_pct" if state in ("using", "unknown") else f"delay_{state}_pct" for state in STATE_COLUMNS)
DELAY_COLUMNS = ("delay_samples", *STATE_PCT_COLUMNS)
_TYPES = {"delay_samples": "BIGINT", **dict.fromkeys(STATE_PCT_COLUMNS, "DOUBLE")}
_DAY_US = 86_400_000_000
_MINUTE_US = 60_000_000


def delay_sums(samples: pa.Table, report_date: date, interval_minutes: int) -> pa.Table:
    """Per class queue and level (QUEUE, interval_minutes, `start_us`: the level's start in microseconds since the
    epoch), `samples` and each state summed (pure). `samples` has SAMPLE_COLUMNS; copies (one DEDUP_KEY, identical
    rows) are counted once, rows of other days not at all."""
    midnight_us = (report_date - date(1970, 1, 1)).days * _DAY_US
    # Copies of a row are identical: the largest of each count is the row's own.
    distinct = samples.group_by(list(DEDUP_KEY), use_threads=False).aggregate([(name, "max") for name in ("samples", *STATE_COLUMNS)])
    distinct = distinct.rename_columns([name.removesuffix("_max") for name in distinct.column_names])
    minute_us = pc.multiply(distinct["minute"].cast(pa.int64()), 1000)
    of_the_day = pc.and_(pc.greater_equal(minute_us, midnight_us), pc.less(minute_us, midnight_us + _DAY_US))
    distinct, minute_us = distinct.filter(of_the_day), minute_us.filter(of_the_day)
    interval_us = interval_minutes * _MINUTE_US
    since_midnight = pc.subtract(minute_us, midnight_us)
    # (Integers divide whole.)
    interval_start = pc.add(pc.multiply(pc.divide(since_midnight, interval_us), interval_us), midnight_us)
    levels = [(interval_minutes, interval_start)]
    if interval_minutes != WHOLE_DAY_MINUTES:
        levels.append((WHOLE_DAY_MINUTES, pa.array([midnight_us] * distinct.num_rows, pa.int64())))
    counts = distinct.select([*QUEUE, "samples", *STATE_COLUMNS])
    at_levels = pa.concat_tables(
        counts.append_column("interval_minutes", pa.array([minutes] * counts.num_rows, pa.int32())).append_column("start_us", starts)
        for minutes, starts in levels
    )
    summed = at_levels.group_by([*QUEUE, "interval_minutes", "start_us"], use_threads=False).aggregate(
        [(name, "sum") for name in ("samples", *STATE_COLUMNS)]
    )
    return summed.rename_columns([name.removesuffix("_sum") for name in summed.column_names])


def with_delays(report: DataFrame, sums: pa.Table | None, columns: Sequence[str]) -> DataFrame:
    """`report`'s rows with their class queue's DELAY_COLUMNS at their level, from `sums` (`delay_sums`; nulls where
    it has no row, and for every row without sums), as `columns` (the report's, then DELAY_COLUMNS)."""
    if sums is None or sums.num_rows == 0:
        return report.selectExpr(*columns[: -len(DELAY_COLUMNS)], *(f"CAST(NULL AS {_TYPES[name]}) AS {name}" for name in DELAY_COLUMNS))
    whole = " + ".join(STATE_COLUMNS)
    delays = report.sparkSession.createDataFrame(sums).selectExpr(
        *QUEUE,
        "interval_minutes",
        # As report_figures makes the report's interval_start (UTC wall time without a zone), so the two join.
        "CAST(timestamp_micros(start_us) AS TIMESTAMP_NTZ) AS interval_start",
        "samples AS delay_samples",
        *(
            f"IF(({whole}) > 0, 100.0D * {state} / ({whole}), NULL) AS {pct}"
            for state, pct in zip(STATE_COLUMNS, STATE_PCT_COLUMNS, strict=True)
        ),
    )
    return report.join(F.broadcast(delays), [*QUEUE, "interval_minutes", "interval_start"], "left").select(*columns)
