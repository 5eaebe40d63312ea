"""The report's using and delay columns, as RMF's workload activity report has them: of a day's delay samples
(spark_jobs/contract/delay_samples.py), copies dropped by DEDUP_KEY, the states counted per class queue (AE, node,
class, period) summed per interval and for the day, each state as a percentage of all the states counted.

A scheduler failover's gap is fewer `samples`, never zeros: the percentages are of the states that were counted. The
samples are of the class queue, not of a report class or a policy version: every report row of a class period
(each of its report classes, each version) gets its queue's figures. A day without samples, or an interval without
a row of them, has nulls; an interval sampled while the queue held no request has its samples and null percentages.

The samples are rows per queue per minute, few beside the records: they are summed to a row per class period and
level (interval or day), which is broadcast to the report's rows, so the job's one collect computes them too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

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
_LEVEL = ("interval_minutes", "interval_start")


def delay_levels(samples: DataFrame, report_date: date, interval_minutes: int) -> DataFrame:
    """Per class queue and level (QUEUE, interval_minutes, interval_start as the report has it: UTC wall time), the
    samples and the percentage of each state. `samples` has SAMPLE_COLUMNS (copies allowed; rows of other days are
    left out)."""
    midnight_us = (report_date - date(1970, 1, 1)).days * 86_400_000_000
    interval_us = interval_minutes * 60 * 1_000_000
    # Copies of a row are identical: one of each key is kept. The day's rows go once to their interval and once to
    # the whole day (when the intervals are not whole days themselves).
    interval_start = f"{midnight_us} + floor((unix_micros(minute) - {midnight_us}) / {interval_us}) * {interval_us}"
    levels = [f"named_struct('interval_minutes', {interval_minutes}, 'start_us', {interval_start})"]
    if interval_minutes != WHOLE_DAY_MINUTES:
        levels.append(f"named_struct('interval_minutes', {WHOLE_DAY_MINUTES}, 'start_us', {midnight_us})")
    day = samples.where(f"unix_micros(minute) >= {midnight_us} AND unix_micros(minute) < {midnight_us + 86_400_000_000}")
    at_levels = day.dropDuplicates(list(DEDUP_KEY)).selectExpr(*QUEUE, "samples", *STATE_COLUMNS, f"inline(array({', '.join(levels)}))")
    summed = at_levels.groupBy(*QUEUE, "interval_minutes", "start_us").agg(
        F.expr("sum(samples) AS delay_samples"), *(F.expr(f"sum({state}) AS {state}") for state in STATE_COLUMNS)
    )
    whole = " + ".join(STATE_COLUMNS)
    return summed.selectExpr(
        *QUEUE,
        "interval_minutes",
        # As report_figures makes the report's interval_start (UTC wall time without a zone), so the two join.
        "CAST(timestamp_micros(start_us) AS TIMESTAMP_NTZ) AS interval_start",
        "delay_samples",
        *(
            f"IF(({whole}) > 0, 100.0D * {state} / ({whole}), NULL) AS {pct}"
            for state, pct in zip(STATE_COLUMNS, STATE_PCT_COLUMNS, strict=True)
        ),
    )


def with_delays(
    report: DataFrame, samples: DataFrame | None, report_date: date, interval_minutes: int, columns: Sequence[str]
) -> DataFrame:
    """`report`'s rows with their class queue's DELAY_COLUMNS at their level (nulls where it has none, and for every
    row without `samples`), as `columns` (the report's, then DELAY_COLUMNS)."""
    if samples is None:
        return report.selectExpr(*columns[: -len(DELAY_COLUMNS)], *(f"CAST(NULL AS {_TYPES[name]}) AS {name}" for name in DELAY_COLUMNS))
    delays = F.broadcast(delay_levels(samples, report_date, interval_minutes))
    return report.join(delays, [*QUEUE, *_LEVEL], "left").select(*columns)


_TYPES = {"delay_samples": "BIGINT", **dict.fromkeys(STATE_PCT_COLUMNS, "DOUBLE")}
