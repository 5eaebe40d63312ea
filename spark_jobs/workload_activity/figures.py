"""The report's rows of its cells, as pure functions of Arrow tables (no session, no I/O): the levels (each interval,
and the whole day), the buckets, the nearest-rank percentiles and every figure of a row.

The cells (transform.cells: per group, interval, bucket and response-time bin, the counts and sums of one copy of each
record) are few beside the records: about as many per group and interval as its response times have bins (about
1,800 up to a day; a 10 million record day of 24 groups has 725,000 cells), whatever the records. Spark sums the records into them;
this module takes them from there. In Spark, the levels' sums, a window over each level's cells in bin order and the
rows' sums after it were a stage of their own, the report's slowest after the read (2.4–2.6 s of a fast hour's 10
million record day, on two cores); here the same is a sort and a few passes over columns (0.35–0.58 s on a slow hour).

Figures are those of transform.py's module docstring: the same sums, the same buckets (the contract's tolerant limits),
the same nearest rank; each computed as Spark computed it, in the same floating-point operations, so a row does not
depend on where it was computed. Sums of doubles (the squares) may differ from Spark's in their last bits: they are
added in another order."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.contract.goals import (
    BUCKET_COUNT,
    DISCRETIONARY_PI,
    MAX_VELOCITY_PI,
    TOLERANT_BUCKET_LIMITS_PCT,
    WITHIN_GOAL_BUCKETS,
    bucket_pi,
)
from spark_jobs.contract.records import GROUP_KEYS
from spark_jobs.contract.records import SCHEMA as RECORD_SCHEMA
from spark_jobs.contract.report import WHOLE_DAY_MINUTES
from spark_jobs.workload_activity.delays import DELAY_COLUMNS

REPORT_PERCENTILES = (50, 90, 99)
# Per cell, summed at each level (transform.cells makes them; `response_max` is the cell's largest response).
ADDITIVE = (
    "ended",
    "failed",
    "deleted",
    "abandoned",
    "velocity_met",
    "velocity_known",
    "response_sum",
    "response_squares",
    "queue_sum",
    "queue_squares",
    "execution_sum",
    "execution_squares",
)
CELL_KEY = ("group_id", "interval", "bucket", "bin")
# A group: its names (as the records have them) and goal (tables.GROUP_TYPES, in Arrow's types), by `group_id`.
GROUP_SCHEMA = pa.schema(
    [
        *((name, RECORD_SCHEMA.field(name).type) for name in GROUP_KEYS),
        ("goal_type", pa.string()),
        ("goal_ms", pa.int64()),
        *((name, pa.int32()) for name in ("goal_percentile", "goal_velocity", "importance")),
    ]
)
# The report's columns, in the order of the `workload_reports` table.
REPORT_SCHEMA = pa.schema(
    [
        pa.field("report_date", pa.date32(), nullable=False),
        ("interval_start", pa.timestamp("us")),  # UTC wall time without a zone (Spark's timestamp_ntz)
        pa.field("interval_minutes", pa.int32(), nullable=False),
        *GROUP_SCHEMA,
        *((name, pa.int64()) for name in ("ended_count", "failed_count")),
        ("ended_per_s", pa.float64()),
        *((name, pa.int64()) for name in ("deleted_count", "abandoned_count")),
        *((f"{figure}_{measure}_ms", pa.float64()) for figure in ("response", "queue", "execution") for measure in ("avg", "stddev")),
        *((f"response_p{p}_ms", pa.float64()) for p in REPORT_PERCENTILES),
        pa.field("buckets", pa.list_(pa.field("element", pa.int64())), nullable=False),  # as Spark names an array's items
        *((name, pa.float64()) for name in ("execution_velocity", "performance_index", "goal_met_share")),
        ("delay_samples", pa.int64()),
        *((name, pa.float64()) for name in DELAY_COLUMNS[1:]),
    ]
)
REPORT_COLUMNS = tuple(REPORT_SCHEMA.names)
RESPONSE_TIME_GOALS = ("average", "percentile")
_MINUTE_US = 60_000_000
# No bucket (0..13): a request not ended by its server, or of a goal without a response time.
_NO_BUCKET = -1
# A level's cells are ordered by bin, then bucket (none first) in the four low bits; a cell without a bin first.
_NO_BIN_ORDER = np.iinfo(np.int64).min
_NO_RESPONSE = np.iinfo(np.int64).max

# Columns as numpy arrays (integers, floats, booleans or, for names, objects).
Array = npt.NDArray[Any]


def report_of_cells(cells: pa.Table, groups: pa.Table, report_date: date, interval_minutes: int) -> pa.Table:
    """The report's rows (REPORT_SCHEMA, delay columns null: delays.with_delays fills them) of `cells` (CELL_KEY,
    ADDITIVE, `response_max`; each cell once) of intervals of `interval_minutes`: one row per group and interval, and
    per group for the whole day (interval_minutes WHOLE_DAY_MINUTES), ordered by group and level. `groups` names them
    (`group_id` and GROUP_SCHEMA); a group it lacks keeps its rows, with null names and goal (the job checks)."""
    if cells.num_rows == 0:
        return REPORT_SCHEMA.empty_table()
    levels = _levels(cells, interval_minutes)
    ranked = _ranked(levels)
    named = _named(ranked, groups)
    return _figures(named, report_date)


def _levels(cells: pa.Table, interval_minutes: int) -> pa.Table:
    """The cells at each level: an interval's as they are, and the day's (interval 0) summed over its intervals."""
    parts = [cells.append_column("interval_minutes", pa.array(np.full(cells.num_rows, interval_minutes, np.int32)))]
    if interval_minutes != WHOLE_DAY_MINUTES:
        day = cells.group_by(["group_id", "bucket", "bin"], use_threads=False).aggregate(
            [*((name, "sum") for name in ADDITIVE), ("response_max", "max")]
        )
        day = day.rename_columns([name.removesuffix("_sum").replace("response_max_max", "response_max") for name in day.column_names])
        day = day.append_column("interval", pa.array(np.zeros(day.num_rows, np.int32)))
        parts.append(day.append_column("interval_minutes", pa.array(np.full(day.num_rows, WHOLE_DAY_MINUTES, np.int32))))
    columns = [*CELL_KEY, *ADDITIVE, "response_max", "interval_minutes"]
    return pa.concat_tables([part.select(columns) for part in parts], promote_options="permissive")


def _values(table: pa.Table, name: str, fill: float = 0) -> Array:
    column = table[name]
    return (pc.fill_null(column, fill) if column.null_count else column).to_numpy()


def _valid(table: pa.Table, name: str) -> Array:
    return pc.is_valid(table[name]).to_numpy(zero_copy_only=False)


def _ranked(levels: pa.Table) -> pa.Table:
    """Per level (group, interval_minutes, interval): its sums, the ended requests per bucket summed up to each bucket
    (`within_0`..`within_13`) and the nearest-rank percentiles. A goal without a response time has no bucket in its
    cells: its ended requests are bucketed by their cell's largest response against the level's average."""
    buckets = _values(levels, "bucket", _NO_BUCKET)
    bin_order = np.where(_valid(levels, "bin"), _values(levels, "bin") * 16 + buckets + 1, _NO_BIN_ORDER)
    group_ids, intervals, minutes = (_values(levels, name) for name in ("group_id", "interval", "interval_minutes"))
    order = np.lexsort((bin_order, intervals, minutes, group_ids))
    group_ids, intervals, minutes, buckets = group_ids[order], intervals[order], minutes[order], buckets[order]
    new_level = np.ones(len(order), dtype=bool)
    new_level[1:] = (group_ids[1:] != group_ids[:-1]) | (minutes[1:] != minutes[:-1]) | (intervals[1:] != intervals[:-1])
    starts = np.flatnonzero(new_level)
    level_of = np.cumsum(new_level) - 1

    sums, valid = {}, {}
    for name in ADDITIVE:
        values = _values(levels, name)[order]
        sums[name] = _sum_at(values, starts)
        valid[name] = np.logical_or.reduceat(_valid(levels, name)[order], starts)
    ended = _values(levels, "ended")[order]
    response_max = _values(levels, "response_max", _NO_RESPONSE)[order]
    has_max = _valid(levels, "response_max")[order]
    level_ended = sums["ended"]
    running = np.cumsum(ended)
    ended_up_to = running - (running[starts] - ended[starts])[level_of]

    average = _ratio(sums["response_sum"].astype(np.float64), level_ended, valid["response_sum"])[level_of]
    own_bucket = np.where(buckets != _NO_BUCKET, buckets, _bucket_index(response_max.astype(np.float64), average, has_max))
    bucket = np.where(ended > 0, own_bucket, _NO_BUCKET)
    counted = bucket != _NO_BUCKET
    per_bucket = np.zeros((len(starts), BUCKET_COUNT), np.int64)
    np.add.at(per_bucket, (level_of[counted], bucket[counted]), ended[counted])
    within = np.cumsum(per_bucket, axis=1)

    columns: dict[str, pa.Array] = {
        "group_id": pa.array(group_ids[starts]),
        "interval": pa.array(intervals[starts], pa.int64()),
        "interval_minutes": pa.array(minutes[starts], pa.int32()),
        **{name: pa.array(sums[name], mask=~valid[name]) for name in ADDITIVE},
        **{f"within_{index}": pa.array(within[:, index]) for index in range(BUCKET_COUNT)},
    }
    for percentile in REPORT_PERCENTILES:
        # The smallest response with at least p% of the level's ended requests at or below it.
        reached = (ended > 0) & (ended_up_to * 100 >= level_ended[level_of] * percentile) & has_max
        smallest = np.minimum.reduceat(np.where(reached, response_max, _NO_RESPONSE), starts)
        columns[f"response_p{percentile}_ms"] = pa.array(smallest.astype(np.float64), mask=smallest == _NO_RESPONSE)
    return pa.table(columns)


def _sum_at(values: Array, starts: Array) -> Array:
    """`values` summed from each of `starts` to the next; an integer sum past 64 bits raises, as Spark's did (numpy's
    and Arrow's wrap around; the day's sums were made of the intervals', which then pass it first)."""
    if values.dtype.kind == "i" and np.abs(np.add.reduceat(values.astype(np.float64), starts)).max() >= 2.0**63:
        raise OverflowError("a report sum overflows 64 bits")
    return np.add.reduceat(values, starts)


def _ratio(numerator: Array, denominator: Array, valid: Array) -> Array:
    """numerator / denominator where the denominator is above 0 and the numerator known; NaN elsewhere."""
    known = valid & (denominator > 0)
    return np.divide(numerator, denominator.astype(np.float64), out=np.full(len(numerator), np.nan), where=known)


def _bucket_index(response_ms: Array, goal_ms: Array, known: Array) -> Array:
    """transform.bucket_index on columns: the first limit a response does not exceed; unknown (NaN) goal or response:
    the last bucket, as SQL's CASE falls through to its ELSE."""
    index = np.full(len(response_ms), len(TOLERANT_BUCKET_LIMITS_PCT), np.int64)
    hundredfold = response_ms * 100.0
    for position in reversed(range(len(TOLERANT_BUCKET_LIMITS_PCT))):
        with np.errstate(invalid="ignore"):
            index = np.where(known & (hundredfold <= goal_ms * TOLERANT_BUCKET_LIMITS_PCT[position]), position, index)
    return index


def _named(ranked: pa.Table, groups: pa.Table) -> pa.Table:
    """`ranked` with its group's names and goal (null for a group `groups` lacks), in its own order."""
    rows = ranked.append_column("row", pa.array(np.arange(ranked.num_rows)))
    named = rows.join(groups.select(["group_id", *GROUP_SCHEMA.names]), "group_id", join_type="left outer", use_threads=False)
    return named.sort_by("row")


def _figures(levels: pa.Table, report_date: date) -> pa.Table:
    """The report's columns of each level's sums (`_ranked`, `_named`), in the operations Spark's SQL computed them
    in until this module took them over (transform.py's history)."""
    ended = _values(levels, "ended")
    known = {name: _valid(levels, name) for name in ADDITIVE}
    value = {name: _values(levels, name) for name in ADDITIVE}
    within = [_values(levels, f"within_{index}") for index in range(BUCKET_COUNT)]
    minutes = _values(levels, "interval_minutes")
    midnight_us = int(datetime(report_date.year, report_date.month, report_date.day, tzinfo=UTC).timestamp() * 1_000_000)
    goal_type = levels["goal_type"].to_numpy(zero_copy_only=False)

    def average(name: str) -> Array:
        return _ratio(value[f"{name}_sum"].astype(np.float64), ended, known[f"{name}_sum"])

    def stddev(name: str) -> Array:
        # Spark's greatest() skips a null: with requests ended, an unknown sum gives 0.
        mean = average(name)
        with np.errstate(invalid="ignore"):
            spread = value[f"{name}_squares"] / ended.astype(np.float64) - mean * mean
        spread = np.where(known[f"{name}_squares"] & known[f"{name}_sum"], np.maximum(0.0, spread), 0.0)
        return np.where(ended > 0, np.sqrt(spread), np.nan)

    response_avg = average("response")
    both = value["execution_sum"] + value["queue_sum"]
    velocity = _ratio(100.0 * value["execution_sum"].astype(np.float64), both, known["execution_sum"] & known["queue_sum"])
    columns: dict[str, npt.ArrayLike | pa.Array] = {
        "report_date": pa.array(np.full(levels.num_rows, report_date), pa.date32()),
        "interval_start": pa.array(midnight_us + _values(levels, "interval") * minutes * _MINUTE_US, pa.timestamp("us")),
        "interval_minutes": levels["interval_minutes"],
        **{name: levels[name] for name in GROUP_SCHEMA.names},
        "ended_count": levels["ended"],
        "failed_count": levels["failed"],
        "ended_per_s": ended / (minutes * 60.0),
        "deleted_count": levels["deleted"],
        "abandoned_count": levels["abandoned"],
        "response_avg_ms": response_avg,
        "response_stddev_ms": stddev("response"),
        "queue_avg_ms": average("queue"),
        "queue_stddev_ms": stddev("queue"),
        "execution_avg_ms": average("execution"),
        "execution_stddev_ms": stddev("execution"),
        **{f"response_p{p}_ms": levels[f"response_p{p}_ms"] for p in REPORT_PERCENTILES},
        "buckets": _buckets(within),
        "execution_velocity": velocity,
        "performance_index": _performance_index(levels, goal_type, ended, within, response_avg, velocity),
        "goal_met_share": _goal_met_share(goal_type, ended, within, value["velocity_met"], value["velocity_known"]),
        **{name: pa.nulls(levels.num_rows, REPORT_SCHEMA.field(name).type) for name in DELAY_COLUMNS},
    }
    return pa.table({name: _as_column(columns[name], REPORT_SCHEMA.field(name).type) for name in REPORT_COLUMNS}, schema=REPORT_SCHEMA)


def _as_column(values: npt.ArrayLike | pa.Array | pa.ChunkedArray, arrow_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """`values` as an Arrow column of `arrow_type`: NaN of a computed figure is null (no figure is NaN otherwise)."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values.cast(arrow_type)
    array = np.asarray(values)
    return pa.array(array, arrow_type, mask=np.isnan(array) if array.dtype.kind == "f" else None)


def _buckets(within: list[Array]) -> pa.Array:
    counts = np.stack([within[0], *(within[index] - within[index - 1] for index in range(1, BUCKET_COUNT))], axis=1)
    return pa.ListArray.from_arrays(pa.array(np.arange(0, counts.size + 1, BUCKET_COUNT, dtype=np.int32)), pa.array(counts.ravel()))


def _performance_index(
    levels: pa.Table,
    goal_type: Array,
    ended: Array,
    within: list[Array],
    response_avg: Array,
    velocity: Array,
) -> Array:
    goal_ms = _nullable_float(levels, "goal_ms")
    percentile, has_percentile = _values(levels, "goal_percentile"), _valid(levels, "goal_percentile")
    goal_velocity = _nullable_float(levels, "goal_velocity")
    # A percentile goal's PI: the limit of the first bucket whose share of the ended requests reaches the percentile
    # (in integers, as Spark compared them).
    reached_pi = np.full(len(ended), np.nan)
    for index in reversed(range(BUCKET_COUNT)):
        reached_pi = np.where(has_percentile & (within[index] * 100 >= percentile * ended), bucket_pi(index), reached_pi)
    reached_pi = np.where(ended > 0, reached_pi, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        velocity_pi = np.where(velocity * MAX_VELOCITY_PI <= goal_velocity, MAX_VELOCITY_PI, goal_velocity / velocity)
        velocity_pi = np.where(np.isnan(velocity) | np.isnan(goal_velocity), np.nan, velocity_pi)
        return np.select(
            [goal_type == "discretionary", goal_type == "average", goal_type == "percentile"],
            [np.full(len(ended), DISCRETIONARY_PI), response_avg / goal_ms, reached_pi],
            velocity_pi,
        )


def _nullable_float(levels: pa.Table, name: str) -> Array:
    return np.asarray(pc.fill_null(levels[name].cast(pa.float64()), np.nan).to_numpy(), np.float64)


def _goal_met_share(
    goal_type: Array,
    ended: Array,
    within: list[Array],
    velocity_met: Array,
    velocity_known: Array,
) -> Array:
    all_known = np.ones(len(ended), bool)
    response_share = _ratio(within[WITHIN_GOAL_BUCKETS - 1].astype(np.float64), ended, all_known)
    velocity_share = _ratio(velocity_met.astype(np.float64), velocity_known, all_known)
    is_response = np.isin(goal_type, RESPONSE_TIME_GOALS)
    return np.where(is_response, response_share, np.where(goal_type == "velocity", velocity_share, np.nan))
