"""The report's using and delay columns, as RMF's workload activity report has them: of a day's delay samples
(spark_jobs/contract/delay_samples.py), copies dropped by DEDUP_KEY, the states counted per class queue (AE, node,
class, period) summed per interval and for the day, each state as a percentage of all the states counted.

A scheduler failover's gap is fewer `samples`, never zeros: the percentages are of the states that were counted. The
samples are of the class queue, not of a report class or a policy version: every report row of a class period
(each of its report classes, each version) gets its queue's figures. A day without samples, or an interval without
a row of them, has nulls; an interval sampled while the queue held no request has its samples and null percentages.

The samples are rows per queue per minute, in a file per minute: few rows, many files. They are summed on the driver
(`delay_sums`, Arrow), while the JVM starts, to a row per class queue and level, and those rows joined onto the
collected report's there too (`with_delays`). Read by Spark, the day's 1,440 files took three
jobs and six stages more, and seconds; as an inline table of bound parameters (tables.py), 2,000 rows took a minute
to plan."""

from __future__ import annotations

from datetime import date
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

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


def with_delays(report: pa.Table, sums: pa.Table | None) -> pa.Table:
    """The collected `report` (its DELAY_COLUMNS null), its rows in their order, with their class queue's
    DELAY_COLUMNS at their level from `sums` (`delay_sums`; nulls where it has no row). Joined on the driver: the
    report has a few thousand rows, and Spark took 0.9–1 s of a slow hour to plan the sums as a table and the join."""
    if sums is None or sums.num_rows == 0:
        return report
    key = [*QUEUE, "interval_minutes", "interval_start"]
    states = [sums[state] for state in STATE_COLUMNS]
    whole = reduce(pc.add_checked, states)  # an overflow fails, as Spark's ANSI sum did
    counted = pc.greater(whole, 0)
    whole_double = whole.cast(pa.float64())
    figures = {
        **{name: sums[name] for name in (*QUEUE, "interval_minutes")},
        # As figures.py makes the report's interval_start (UTC wall time without a zone), so the two join.
        "interval_start": sums["start_us"].cast(pa.timestamp("us")),
        "delay_samples": sums["samples"],
        **{
            pct: pc.if_else(counted, pc.divide(pc.multiply(state.cast(pa.float64()), 100.0), whole_double), None)
            for state, pct in zip(states, STATE_PCT_COLUMNS, strict=True)
        },
    }
    schema = report.schema
    delay_table = pa.table({name: column.cast(schema.field(name).type) for name, column in figures.items()})
    # Only the keys are joined (Arrow's join takes no list column, such as the buckets), each report row to at most one
    # row of sums (one per class queue and level), then put back in the report's order.
    rows = report.select(key).append_column("row", pa.array(range(report.num_rows), pa.int64()))
    matched = rows.join(delay_table, key, join_type="left outer", use_threads=False).sort_by("row")
    if matched.num_rows != report.num_rows:
        raise ValueError("the delay sums must have one row per class queue and level (delay_sums)")
    for name in DELAY_COLUMNS:
        report = report.set_column(schema.get_field_index(name), schema.field(name), matched[name])
    return report
