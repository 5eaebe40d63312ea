"""The report's using and delay columns, computed by hand: of the day's delay samples (copies dropped), per class
queue and interval and for the day, each state a percentage of the states counted; nulls without samples."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row, SparkSession

from app.servers.delay_records import merge_minutes, write
from spark_jobs.contract.delay_samples import SCHEMA, STATE_COLUMNS
from spark_jobs.workload_activity import extract
from spark_jobs.workload_activity.delays import DELAY_COLUMNS, SAMPLE_COLUMNS, delay_sums, with_delays
from spark_jobs.workload_activity.extract import RECORDS_SCHEMA, read_delay_samples
from spark_jobs.workload_activity.figures import REPORT_COLUMNS
from spark_jobs.workload_activity.job import collect_report
from spark_jobs.workload_activity.policy_goals import activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds
from tests.spark_jobs.workload_activity.test_transform import DAY, MIDNIGHT, START, V1, record


def sample(
    minute: int,
    service_class: str = "FAST",
    *,
    samples: int = 240,
    scheduler: str = "s1",
    epoch: int = 1,
    day: date = DAY,
    **states: int,
) -> dict[str, Any]:
    """A minute's row of a class queue of PAYROLL on LOCAL (period 1): `minute` minutes after `day`'s midnight."""
    at = MIDNIGHT + timedelta(days=(day - DAY).days, minutes=minute)
    return {
        "day": at.date(),
        "minute": at,
        "application_environment": "PAYROLL",
        "node": "LOCAL",
        "service_class": service_class,
        "period": 1,
        "scheduler": scheduler,
        "epoch": epoch,
        "samples": samples,
        **{state: states.get(state, 0) for state in STATE_COLUMNS},
    }


def table(samples: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(samples, schema=SCHEMA)


def report_with(spark: SparkSession, records: list[dict[str, Any]], samples: Any) -> dict[tuple[str, int, Any], Any]:
    """The report rows by (service class, interval minutes, interval start); `samples`: rows, a table or None."""
    if isinstance(samples, list):
        samples = table(samples)
    rows = workload_activity_rows(spark, records, samples)
    assert list(rows[0].asDict()) == list(REPORT_COLUMNS)
    keyed = {(row.service_class, row.interval_minutes, row.interval_start): row for row in rows}
    assert len(keyed) == len(rows)
    return keyed


def delays(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in DELAY_COLUMNS}


def expected(samples: int | None, **pcts: float) -> dict[str, Any]:
    names = {"using": "using_pct", "unknown": "unknown_pct"}
    figures = {name: None if samples is None else 0.0 for name in DELAY_COLUMNS[1:]}
    figures.update({names.get(state, f"delay_{state}_pct"): pct for state, pct in pcts.items()})
    return {"delay_samples": samples, **figures}


def at(minutes: int) -> Any:
    return START + timedelta(minutes=minutes)


# FAST has requests ending in intervals 0 (00:00) and 1 (00:15); VEL in interval 0 only.
RECORDS = [record("FAST", 50), record("FAST", 60, ended=timedelta(minutes=20)), record("VEL", 70)]


def test_a_day_by_hand_per_interval_and_for_the_day(spark: SparkSession) -> None:
    samples = [
        sample(0, using=60, busy_higher=30, unknown=10),
        sample(14, using=20, servers_starting=20, samples=120),
        sample(16, using=10, environment_state=40, no_server=50),
        # An interval without a report row (nothing ended then): counted in the day.
        sample(40, group_cap=100),
        sample(3, "VEL", busy_lower=5, redelivery=15),
    ]
    rows = report_with(spark, RECORDS, samples)
    # Interval 0: using 80, busy_higher 30, unknown 10, servers_starting 20 of 140 states.
    assert delays(rows[("FAST", 15, at(0))]) == pytest.approx(
        expected(360, using=8000 / 140, busy_higher=3000 / 140, unknown=1000 / 140, servers_starting=2000 / 140)
    )
    assert delays(rows[("FAST", 15, at(15))]) == pytest.approx(expected(240, using=10.0, environment_state=40.0, no_server=50.0))
    # The day: 340 states, of 840 samples.
    assert delays(rows[("FAST", 1440, at(0))]) == pytest.approx(
        expected(
            840,
            using=9000 / 340,
            busy_higher=3000 / 340,
            unknown=1000 / 340,
            servers_starting=2000 / 340,
            environment_state=4000 / 340,
            no_server=5000 / 340,
            group_cap=10000 / 340,
        )
    )
    assert delays(rows[("VEL", 15, at(0))]) == pytest.approx(expected(240, busy_lower=25.0, redelivery=75.0))
    assert delays(rows[("VEL", 1440, at(0))]) == delays(rows[("VEL", 15, at(0))])


def test_copies_are_dropped(spark: SparkSession) -> None:
    samples = [sample(0, using=60, busy_higher=40), sample(1, busy_higher=100)]
    once = report_with(spark, RECORDS, samples)
    twice = report_with(spark, RECORDS, samples + samples[:1])
    assert (
        delays(twice[("FAST", 15, at(0))])
        == delays(once[("FAST", 15, at(0))])
        == pytest.approx(expected(480, using=30.0, busy_higher=70.0))
    )


def test_a_failover_gap_is_fewer_samples_not_zeros(spark: SparkSession) -> None:
    # The old scheduler sampled the minute's first 100 ticks, the new one (elected 20 ticks later) the last 120; the
    # minute after, nobody: no row. The percentages are of the states counted.
    samples = [
        sample(0, samples=100, using=100, busy_higher=100),
        sample(0, samples=120, scheduler="s2", epoch=2, using=120, busy_higher=120),
        sample(2, scheduler="s2", epoch=2, using=240, busy_higher=240),
    ]
    rows = report_with(spark, RECORDS, samples)
    assert delays(rows[("FAST", 15, at(0))]) == pytest.approx(expected(460, using=50.0, busy_higher=50.0))


def test_a_day_without_samples_has_nulls(spark: SparkSession, tmp_path: Path) -> None:
    assert read_delay_samples(str(tmp_path / "delay_samples"), DAY) is None
    other_day = [sample(0, day=DAY - timedelta(days=1), using=10), sample(0, day=DAY + timedelta(days=1), using=10)]
    for samples in (None, other_day, table([])):
        rows = report_with(spark, RECORDS, samples)
        assert all(delays(row) == expected(None) for row in rows.values()), samples


def test_an_interval_sampled_empty_has_its_samples_and_null_percentages(spark: SparkSession) -> None:
    rows = report_with(spark, RECORDS, [sample(0), sample(20, using=4)])
    assert delays(rows[("FAST", 15, at(0))]) == expected(240) | dict.fromkeys(DELAY_COLUMNS[1:])
    assert delays(rows[("FAST", 15, at(15))]) == pytest.approx(expected(240, using=100.0))
    assert delays(rows[("VEL", 15, at(0))]) == expected(None)


def test_every_report_class_of_a_class_period_gets_its_queue_figures(spark: SparkSession) -> None:
    records = [record("FAST", 50, report_class="ATM"), record("FAST", 50, report_class="TELLER")]
    rows = workload_activity_rows(spark, records, table([sample(0, using=1, busy_higher=3)]))
    assert len(rows) == 4
    assert {row.report_class: delays(row)["delay_busy_higher_pct"] for row in rows if row.interval_minutes == 15} == {
        "ATM": 75.0,
        "TELLER": 75.0,
    }


def test_the_collected_rows_keep_their_order_and_get_only_their_queue_s_figures() -> None:
    """`with_delays` alone, on rows as the job collects them: an unmatched row first (a join puts it last), two
    report classes of one class queue, a row without an environment's name (a null never matches, as in Spark's
    join) beside a sample row without one, and the day's row; the rest of each row, its list column among it, as
    it was."""
    samples = [sample(0, using=3, busy_higher=1), {**sample(0, using=5), "application_environment": None}]
    sums = delay_sums(table(samples).select(list(SAMPLE_COLUMNS)), DAY, 15)
    places = [("PAYROLL", "VEL", 15, at(0)), ("PAYROLL", "FAST", 15, at(0)), ("PAYROLL", "FAST", 15, at(0))]
    places += [(None, "FAST", 15, at(0)), ("PAYROLL", "FAST", 1440, START)]
    count = len(places)
    report = pa.table(
        {
            "application_environment": pa.array([place[0] for place in places], pa.string()),
            "node": pa.array(["LOCAL"] * count, pa.string()),
            "service_class": pa.array([place[1] for place in places], pa.string()),
            "period": pa.array([1] * count, pa.int32()),
            "report_class": pa.array(["", "ATM", "TELLER", "", ""], pa.string()),
            "interval_minutes": pa.array([place[2] for place in places], pa.int32()),
            "interval_start": pa.array([place[3] for place in places], pa.timestamp("us")),
            "buckets": pa.array([[index] for index in range(count)], pa.list_(pa.int64())),
            "delay_samples": pa.nulls(count, pa.int64()),
            **{name: pa.nulls(count, pa.float64()) for name in DELAY_COLUMNS[1:]},
        }
    )
    filled = with_delays(report, sums)
    assert filled.schema == report.schema
    assert filled.drop_columns(list(DELAY_COLUMNS)) == report.drop_columns(list(DELAY_COLUMNS))
    figures = [{name: row[name] for name in DELAY_COLUMNS} for row in filled.to_pylist()]
    fast = expected(240, using=75.0, busy_higher=25.0)
    assert figures == [expected(None), fast, fast, expected(None), fast]


def workload_activity_rows(spark: SparkSession, records: list[dict[str, Any]], samples: pa.Table | None) -> list[Any]:
    """The report's rows, its delay columns of `samples` (as read: SAMPLE_COLUMNS) summed as the job sums them."""
    sums = None if samples is None else delay_sums(samples.select(list(SAMPLE_COLUMNS)), DAY, 15)
    frame = spark.createDataFrame(records, RECORDS_SCHEMA)
    steps = activation_steps([V1], *day_bounds(DAY))
    collected = collect_report(frame, goal_rows([V1]), steps, DAY, 15, None, None, lambda _: None, sums)
    return [Row(**row) for row in collected.to_pylist()]


def test_the_files_the_scheduler_writes_read_as_they_are(spark: SparkSession, tmp_path: Path) -> None:
    """The scheduler's files (its writer, partitioned by day), a copy of one in a file of its own."""
    root = tmp_path / "delay_samples"
    rows = [sample(0, using=3, busy_higher=1), sample(1, using=1, busy_higher=3), sample(0, day=DAY + timedelta(days=1), using=9)]
    write(root, table(rows))
    write(root, table(rows[:1]))
    assert len(list((root / f"date={DAY.isoformat()}").glob("*.parquet"))) == 2
    samples = read_delay_samples(str(root), DAY)
    assert samples is not None and samples.column_names == list(SAMPLE_COLUMNS)
    report = report_with(spark, RECORDS, samples)
    assert delays(report[("FAST", 15, at(0))]) == pytest.approx(expected(480, using=50.0, busy_higher=50.0))


def test_minute_files_merged_or_not_and_a_file_gone_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A day of minute files and the same day with some merged into an hour's file (what the scheduler leaves once an
    hour is over) read as the same rows; a file merged away between the listing and the read makes a new listing."""
    root = tmp_path / "delay_samples"
    for minute in range(4):
        write(root, table([sample(minute, using=minute + 1, busy_higher=1)]))
    minutes = read_delay_samples(str(root), DAY)
    merged = merge_minutes(root / f"date={DAY.isoformat()}", datetime.now(UTC) + timedelta(milliseconds=1))
    write(root, table([sample(4, using=5, busy_higher=1)]))
    assert merged is not None and sorted(path.name == merged.name for path in merged.parent.iterdir()) == [False, True]
    both = read_delay_samples(str(root), DAY)
    assert minutes is not None and both is not None and both.num_rows == minutes.num_rows + 1
    assert delay_sums(both, DAY, 15) == delay_sums(
        pa.concat_tables([minutes, table([sample(4, using=5, busy_higher=1)]).select(list(SAMPLE_COLUMNS))]), DAY, 15
    )

    gone = write(root, table([sample(5, using=6)]))[0]
    listed = extract.ds.dataset

    def listed_then_merged(*args: Any, **kwargs: Any) -> Any:
        dataset = listed(*args, **kwargs)
        if gone.exists():
            gone.unlink()  # as a merge removes it, once its rows are in the merged file
        return dataset

    monkeypatch.setattr(extract.ds, "dataset", listed_then_merged)
    again = read_delay_samples(str(root), DAY)
    assert again is not None and again.num_rows == both.num_rows
