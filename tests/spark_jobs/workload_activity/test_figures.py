"""The report's rows of its cells (figures.py) on small in-code Arrow tables, without Spark: the levels, the buckets
of goals without a response time, the nearest ranks, unknown sums and a group without names."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pytest

from spark_jobs.contract.goals import DISCRETIONARY_PI, MAX_VELOCITY_PI
from spark_jobs.workload_activity.figures import ADDITIVE, GROUP_SCHEMA, REPORT_SCHEMA, report_of_cells
from spark_jobs.workload_activity.tables import GROUP_TYPES

DAY = date(2026, 11, 20)
CELL_TYPES = {
    "group_id": pa.int64(),
    "interval": pa.int32(),
    "bucket": pa.int32(),
    "bin": pa.int64(),
    **{name: pa.float64() if name.endswith("_squares") else pa.int64() for name in ADDITIVE},
    "response_max": pa.int64(),
}


def cell(group_id: int, interval: int, bin_: int | None, *, bucket: int | None = None, ended: int = 1, **sums: Any) -> dict[str, Any]:
    """A cell of `ended` requests of response `bin_` ms each (below 100 ms a bin is its millisecond), queue 0."""
    response = None if bin_ is None else bin_ * ended
    return {
        "group_id": group_id,
        "interval": interval,
        "bucket": bucket,
        "bin": bin_,
        "ended": ended,
        "failed": 0,
        "deleted": 0 if ended else 1,
        "abandoned": 0,
        "velocity_met": 0,
        "velocity_known": 0,
        "response_sum": response,
        "response_squares": None if bin_ is None else float(bin_ * bin_ * ended),
        "queue_sum": 0 if ended else None,
        "queue_squares": 0.0 if ended else None,
        "execution_sum": response,
        "execution_squares": None if bin_ is None else float(bin_ * bin_ * ended),
        "response_max": bin_,
    } | sums


def cells(*rows: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), pa.schema(CELL_TYPES.items()))


def groups(*goals: tuple[int, str, dict[str, int]]) -> pa.Table:
    """Groups by id, each of class `name` with a goal of `goal` (goal_type and its figures)."""
    rows = [
        {"group_id": group_id, "application_environment": "AE", "node": "N", "service_class": name, "period": 1, "report_class": ""}
        | {"policy_version": 1, "goal_ms": None, "goal_percentile": None, "goal_velocity": None, "importance": 1}
        | goal
        for group_id, name, goal in goals
    ]
    return pa.Table.from_pylist(rows, pa.schema([("group_id", pa.int64()), *GROUP_SCHEMA]))


def rows_of(table: pa.Table) -> dict[tuple[str | None, int, datetime], dict[str, Any]]:
    assert table.schema == REPORT_SCHEMA
    rows = {(row["service_class"], row["interval_minutes"], row["interval_start"]): row for row in table.to_pylist()}
    assert len(rows) == table.num_rows
    return rows


AVERAGE = (1, "AVG", {"goal_type": "average", "goal_ms": 100})
VELOCITY = (2, "VEL", {"goal_type": "velocity", "goal_velocity": 50})
MIDNIGHT = datetime(2026, 11, 20)


def test_each_interval_and_the_whole_day_are_summed_from_the_cells() -> None:
    table = cells(cell(1, 0, 40, bucket=0), cell(1, 0, 80, bucket=3), cell(1, 3, 80, bucket=3, ended=2), cell(1, 95, 20, bucket=0))
    rows = rows_of(report_of_cells(table, groups(AVERAGE), DAY, 15))
    assert set(rows) == {("AVG", 15, MIDNIGHT.replace(minute=minute, hour=hour)) for hour, minute in ((0, 0), (0, 45), (23, 45))} | {
        ("AVG", 1440, MIDNIGHT)
    }
    first, day = rows[("AVG", 15, MIDNIGHT)], rows[("AVG", 1440, MIDNIGHT)]
    assert (first["ended_count"], first["response_avg_ms"], first["response_p50_ms"], first["response_p90_ms"]) == (2, 60.0, 40.0, 80.0)
    assert first["buckets"] == [1, 0, 0, 1, *[0] * 10]
    assert first["performance_index"] == pytest.approx(0.6)
    assert (day["ended_count"], day["response_avg_ms"], day["ended_per_s"]) == (5, 60.0, 5 / 86400)
    assert day["buckets"] == [2, 0, 0, 3, *[0] * 10]
    # Nearest rank: 50% of 5 is the 3rd smallest (20, 40, 80, 80, 80).
    assert (day["response_p50_ms"], day["response_p99_ms"]) == (80.0, 80.0)
    assert day["response_stddev_ms"] == pytest.approx(((20**2 + 40**2 + 3 * 80**2) / 5 - 60**2) ** 0.5)


def test_whole_day_intervals_are_the_day_once() -> None:
    rows = rows_of(report_of_cells(cells(cell(1, 0, 40, bucket=0), cell(1, 0, 90, bucket=4)), groups(AVERAGE), DAY, 1440))
    assert list(rows) == [("AVG", 1440, MIDNIGHT)]
    assert rows[("AVG", 1440, MIDNIGHT)]["ended_count"] == 2


def test_a_goal_without_a_response_time_is_bucketed_against_its_level_s_average() -> None:
    # Average 60 ms in the first interval: 20 ms is ≤50% of it, 100 ms ≤200%; the day's average is 50 ms.
    table = cells(cell(2, 0, 20), cell(2, 0, 100), cell(2, 1, 30, ended=2))
    rows = rows_of(report_of_cells(table, groups(VELOCITY), DAY, 15))
    assert rows[("VEL", 15, MIDNIGHT)]["buckets"] == [1, *[0] * 10, 1, 0, 0]
    # Against the day's 45 ms: 20 ≤50%, 30 ≤70%, 100 ≤400%.
    assert rows[("VEL", 1440, MIDNIGHT)]["buckets"] == [1, 0, 2, *[0] * 9, 1, 0]


def test_velocity_and_discretionary_figures() -> None:
    velocity = cell(2, 0, 100, velocity_met=1, velocity_known=1, queue_sum=60, execution_sum=40)
    discretionary = (3, "DISC", {"goal_type": "discretionary"})
    rows = rows_of(report_of_cells(cells(velocity, cell(3, 0, 10)), groups(VELOCITY, discretionary), DAY, 15))
    vel = rows[("VEL", 15, MIDNIGHT)]
    # Velocity 40 against a goal of 50: PI 1.25.
    assert (vel["execution_velocity"], vel["performance_index"], vel["goal_met_share"]) == (40.0, 1.25, 1.0)
    disc = rows[("DISC", 15, MIDNIGHT)]
    assert (disc["performance_index"], disc["goal_met_share"]) == (DISCRETIONARY_PI, None)


def test_requests_that_ended_without_a_server_have_counts_and_no_response_figures() -> None:
    rows = rows_of(report_of_cells(cells(cell(1, 0, None, ended=0)), groups(AVERAGE), DAY, 15))
    row = rows[("AVG", 15, MIDNIGHT)]
    assert (row["ended_count"], row["deleted_count"], row["buckets"]) == (0, 1, [0] * 14)
    figures = ("response_avg_ms", "response_stddev_ms", "queue_avg_ms", "response_p50_ms", "execution_velocity", "performance_index")
    assert [row[name] for name in figures] == [None] * len(figures)
    assert row["goal_met_share"] is None


def test_an_unknown_sum_of_ended_requests_has_no_average_and_a_zero_deviation_as_spark_had() -> None:
    # Spark's greatest(0, NULL) is 0: the deviation of an unknown sum came out 0, the average null.
    rows = rows_of(report_of_cells(cells(cell(1, 0, 40, bucket=0, queue_sum=None, queue_squares=None)), groups(AVERAGE), DAY, 15))
    row = rows[("AVG", 15, MIDNIGHT)]
    assert (row["queue_avg_ms"], row["queue_stddev_ms"], row["execution_velocity"]) == (None, 0.0, None)


def test_a_group_the_table_lacks_keeps_its_rows_without_names() -> None:
    rows = rows_of(report_of_cells(cells(cell(1, 0, 40, bucket=0), cell(9, 0, 50, bucket=0, ended=2)), groups(AVERAGE), DAY, 15))
    unnamed = rows[(None, 1440, MIDNIGHT)]
    assert (unnamed["ended_count"], unnamed["response_avg_ms"], unnamed["goal_type"], unnamed["performance_index"]) == (2, 50.0, None, None)
    assert rows[("AVG", 1440, MIDNIGHT)]["ended_count"] == 1


def test_no_cells_no_rows() -> None:
    assert report_of_cells(cells(), groups(AVERAGE), DAY, 15) == REPORT_SCHEMA.empty_table()


def test_a_sum_that_would_overflow_is_refused() -> None:
    table = cells(cell(1, 0, 40, bucket=0, response_sum=2**62), cell(1, 1, 40, bucket=0, response_sum=2**62))
    with pytest.raises(OverflowError):
        report_of_cells(table, groups(AVERAGE), DAY, 15)


PERCENTILE = (4, "PCT", {"goal_type": "percentile", "goal_ms": 100, "goal_percentile": 90})


def test_a_percentile_goal_s_index_is_the_limit_of_the_bucket_that_reaches_the_percentile() -> None:
    # 9 of 10 within ≤120%: PI 1.2; then the 10th in >400% decides the 99th: 4.01, the overflow bucket's.
    nine_of_ten = cells(cell(4, 0, 50, bucket=0, ended=8), cell(4, 0, 115, bucket=7), cell(4, 0, 500, bucket=13))
    rows = rows_of(report_of_cells(nine_of_ten, groups(PERCENTILE), DAY, 15))
    assert (rows[("PCT", 15, MIDNIGHT)]["performance_index"], rows[("PCT", 15, MIDNIGHT)]["goal_met_share"]) == (1.2, 0.8)
    ninety_nine = (4, "PCT", {"goal_type": "percentile", "goal_ms": 100, "goal_percentile": 99})
    assert rows_of(report_of_cells(nine_of_ten, groups(ninety_nine), DAY, 15))[("PCT", 15, MIDNIGHT)]["performance_index"] == 4.01


def test_a_velocity_of_zero_is_the_largest_index() -> None:
    only_waited = cell(2, 0, 100, queue_sum=100, execution_sum=0, velocity_known=1)
    row = rows_of(report_of_cells(cells(only_waited), groups(VELOCITY), DAY, 15))[("VEL", 15, MIDNIGHT)]
    assert (row["execution_velocity"], row["performance_index"], row["goal_met_share"]) == (0.0, MAX_VELOCITY_PI, 0.0)


def test_a_level_s_cells_without_a_response_count_but_rank_nothing() -> None:
    # Deleted requests (no bin, first in order) beside ended ones: the ranks are of the 4 ended requests alone.
    table = cells(cell(1, 0, None, ended=0, deleted=3), cell(1, 0, 30, bucket=0, ended=2), cell(1, 0, 60, bucket=1, ended=2))
    row = rows_of(report_of_cells(table, groups(AVERAGE), DAY, 15))[("AVG", 15, MIDNIGHT)]
    assert (row["ended_count"], row["deleted_count"], row["response_p50_ms"], row["response_p90_ms"]) == (4, 3, 30.0, 60.0)
    assert row["buckets"] == [2, 2, *[0] * 12]


def test_the_group_columns_are_the_group_table_s() -> None:
    spark_types = {"STRING": pa.string(), "INT": pa.int32(), "BIGINT": pa.int64()}
    assert [(field.name, field.type) for field in GROUP_SCHEMA] == [(name, spark_types[kind]) for name, kind in GROUP_TYPES.items()]
