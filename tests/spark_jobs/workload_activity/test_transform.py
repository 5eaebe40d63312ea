"""The report transform on small in-code DataFrames, against figures computed by hand."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import Row, SparkSession

from app.policy.schemas import AverageGoal, PercentileGoal, VelocityGoal
from spark_jobs.contract.records import GROUP_KEYS
from spark_jobs.manager.goals import evaluate
from spark_jobs.workload_activity.extract import RECORDS_SCHEMA
from spark_jobs.workload_activity.job import collect_report
from spark_jobs.workload_activity.policy_goals import PolicyVersionInfo, activation_steps, goal_rows
from spark_jobs.workload_activity.transform import day_bounds

DAY = date(2026, 11, 20)
MIDNIGHT = datetime(2026, 11, 20, tzinfo=UTC)
# The report's interval starts are UTC wall times (timestamp_ntz).
START = MIDNIGHT.replace(tzinfo=None)
POLICY = {
    "name": "TEST",
    "service_classes": [
        {"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": 100}},
        {"name": "PCT", "importance": 2, "goal": {"type": "percentile", "percentile": 90, "response_time_ms": 100}},
        {"name": "VEL", "importance": 3, "goal": {"type": "velocity", "velocity": 50}},
        {
            "name": "TWO",
            "periods": [
                {"duration_ms": 1000, "importance": 2, "goal": {"type": "average", "response_time_ms": 500}},
                {"importance": 5, "goal": {"type": "discretionary"}},
            ],
        },
    ],
    "classification": [{"subsystem_type": "CB", "default_service_class": "FAST"}],
    "application_environments": [{"name": "PAYROLL", "subsystem_type": "CB"}],
}
V1 = PolicyVersionInfo(1, MIDNIGHT - timedelta(days=3), POLICY)

_tokens = iter(range(10**9))


def record(
    service_class: str,
    response_ms: int,
    *,
    queue_ms: int = 10,
    ended: timedelta = timedelta(minutes=5),
    outcome: str = "completed",
    period: int = 1,
    token: str | None = None,
    report_class: str | None = None,
) -> dict[str, Any]:
    by_server = outcome in ("completed", "failed")
    return {
        "token": token or f"LOCAL~PAYROLL~{next(_tokens)}",
        "application_environment": "PAYROLL",
        "node": "LOCAL",
        "service_class": service_class,
        "period": period,
        "report_class": report_class,
        "policy_version": 1,
        "outcome": outcome,
        "ended_at": MIDNIGHT + ended,
        "response_time_ms": response_ms,
        "queue_time_ms": queue_ms if by_server else response_ms,
        "execution_time_ms": response_ms - queue_ms if by_server else None,
    }


def report_rows(
    spark: SparkSession,
    records: list[dict[str, Any]] | None,
    versions: list[PolicyVersionInfo] = [V1],  # noqa: B006
    declared_keys: list[dict[str, Any]] | None = None,
    distinct: list[dict[str, Any]] | None = None,
    interval_minutes: int = 15,
) -> list[Any]:
    frame = None if records is None else spark.createDataFrame(records, RECORDS_SCHEMA)
    distinct_frame = None if distinct is None else spark.createDataFrame(distinct, RECORDS_SCHEMA)
    steps = activation_steps(versions, *day_bounds(DAY))
    report = collect_report(frame, goal_rows(versions), steps, DAY, interval_minutes, declared_keys, distinct_frame, lambda _: None)
    return [Row(**row) for row in report.to_pylist()]


def group_keys(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The distinct group keys of `records`, as their files declare them."""
    return [dict(key) for key in {tuple((column, r[column]) for column in GROUP_KEYS) for r in records}]


def report(spark: SparkSession, records: list[dict[str, Any]], versions: list[PolicyVersionInfo] = [V1]) -> dict[tuple, Any]:  # noqa: B006
    """The report rows by (service class, period, interval minutes, interval start, policy version)."""
    rows = report_rows(spark, records, versions)
    keyed = {(r.service_class, r.period, r.interval_minutes, r.interval_start, r.policy_version): r for r in rows}
    assert len(keyed) == len(rows)
    return keyed


def day_row(rows: dict[tuple, Any], service_class: str, period: int = 1, version: int = 1) -> Any:
    return rows[(service_class, period, 1440, START, version)]


def test_average_goal_by_hand(spark: SparkSession) -> None:
    rows = report(spark, [record("FAST", r) for r in (40, 80, 120, 200)])
    row = rows[("FAST", 1, 15, START, 1)]
    assert (row.goal_type, row.goal_ms, row.importance) == ("average", 100, 1)
    assert row.ended_count == 4 and row.failed_count == 0
    assert row.ended_per_s == pytest.approx(4 / 900)
    assert row.response_avg_ms == 110
    assert row.response_stddev_ms == pytest.approx(3500**0.5)  # deviations -70, -30, 10, 90
    assert (row.queue_avg_ms, row.queue_stddev_ms) == (10, 0)
    assert row.execution_avg_ms == 100
    assert (row.response_p50_ms, row.response_p90_ms, row.response_p99_ms) == (80, 200, 200)
    # 40% → ≤50, 80% → ≤80, 120% → ≤120, 200% → ≤200
    assert row.buckets == [1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert row.performance_index == pytest.approx(1.1)
    assert row.goal_met_share == 0.5
    assert row.execution_velocity == pytest.approx(100 * 400 / 440)
    # Everything ended in the first interval: the whole day says the same, per second of a day.
    day = day_row(rows, "FAST")
    assert (day.ended_count, day.response_avg_ms, day.buckets) == (4, 110, row.buckets)
    assert day.ended_per_s == pytest.approx(4 / 86400)


def test_percentile_goal_by_hand(spark: SparkSession) -> None:
    rows = report(spark, [record("PCT", r) for r in (50, 60, 70, 100, 100, 100, 100, 100, 100, 250)])
    row = day_row(rows, "PCT")
    assert row.buckets == [1, 1, 1, 0, 0, 6, 0, 0, 0, 0, 0, 0, 1, 0]
    # 9 of 10 (90%) are within the ≤100% bucket: PI 1.0; the 10th took 250%.
    assert row.performance_index == 1.0
    assert row.goal_met_share == 0.9
    assert (row.response_p50_ms, row.response_p90_ms, row.response_p99_ms) == (100, 100, 250)


def test_velocity_goal_by_hand(spark: SparkSession) -> None:
    # (queue, execution): velocities 70, 40 and 100 against a goal of 50.
    rows = report(spark, [record("VEL", 100, queue_ms=q) for q in (30, 60, 0)])
    row = day_row(rows, "VEL")
    assert row.execution_velocity == pytest.approx(70)  # 100 × 210 / 300
    assert row.performance_index == pytest.approx(50 / 70)
    assert row.goal_met_share == pytest.approx(2 / 3)
    # No response time goal: the distribution is against the average (100 ms), every response at 100%.
    assert row.buckets == [0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]
    assert (row.goal_type, row.goal_velocity, row.goal_ms) == ("velocity", 50, None)


def test_discretionary_goal_and_a_request_that_ended_in_its_second_period(spark: SparkSession) -> None:
    # TWO's first period lasts 1000 ms: these ended in period 2, which is discretionary.
    rows = report(spark, [record("TWO", 1000, period=2), record("TWO", 3000, period=2), record("TWO", 300)])
    second = day_row(rows, "TWO", period=2)
    assert (second.goal_type, second.importance, second.ended_count) == ("discretionary", 5, 2)
    assert second.performance_index == 0.81 and second.goal_met_share is None
    # Against the average of 2000 ms: 50% → ≤50, 150% → ≤150.
    assert second.buckets == [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    first = day_row(rows, "TWO", period=1)
    assert (first.goal_type, first.goal_ms, first.ended_count, first.performance_index) == ("average", 500, 1, pytest.approx(0.6))


def test_duplicates_are_counted_once(spark: SparkSession) -> None:
    once = [record("FAST", r) for r in (40, 80, 120, 200)]
    rows = report(spark, once + [dict(once[0]), dict(once[3]), dict(once[3])])
    row = day_row(rows, "FAST")
    assert row.ended_count == 4
    assert row.response_avg_ms == 110
    assert row.buckets == [1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]


def test_records_known_to_hold_no_copies_are_summed_with_the_rest(spark: SparkSession) -> None:
    may_have_copies = [record("FAST", r) for r in (40, 80)] + [record("PCT", 130, outcome="failed")]
    distinct = [
        record("FAST", 80),
        record("FAST", 300, ended=timedelta(minutes=20)),
        record("PCT", 90),
        record("VEL", 400, outcome="deleted"),
    ]
    copies = [dict(may_have_copies[0]), dict(may_have_copies[2]), dict(may_have_copies[2])]
    split = report_rows(spark, may_have_copies + copies, distinct=distinct)
    assert sorted(split) == sorted(report_rows(spark, may_have_copies + distinct))
    # A day whose records all hold no copies (the service's files, read by their footers) is the same report.
    assert sorted(report_rows(spark, None, distinct=may_have_copies + distinct)) == sorted(split)
    # ... and the groups of either part are found in the records when no file declares them.
    assert {(r.service_class, r.ended_count, r.deleted_count) for r in split if r.interval_minutes == 1440} == {
        ("FAST", 4, 0),
        ("PCT", 2, 0),
        ("VEL", 0, 1),
    }


def test_requests_not_ended_by_a_server_are_counted_apart(spark: SparkSession) -> None:
    records = [
        record("FAST", 50),
        record("FAST", 150, outcome="failed"),
        record("FAST", 9000, outcome="deleted"),
        record("FAST", 9000, outcome="purged"),
        record("FAST", 9000, outcome="abandoned"),
    ]
    row = day_row(report(spark, records), "FAST")
    assert (row.ended_count, row.failed_count, row.deleted_count, row.abandoned_count) == (2, 1, 2, 1)
    assert row.response_avg_ms == 100  # of the two a server ended
    assert sum(row.buckets) == 2


def test_a_report_of_whole_days_or_of_hours(spark: SparkSession) -> None:
    records = [record("FAST", 100, ended=timedelta(minutes=m)) for m in (1, 14, 16, 23 * 60 + 59)] + [record("PCT", 90)]
    whole_day = sorted(row for row in report_rows(spark, records) if row.interval_minutes == 1440)
    assert sorted(report_rows(spark, records, interval_minutes=1440)) == whole_day
    hourly = report_rows(spark, records, interval_minutes=60)
    assert sorted(row for row in hourly if row.interval_minutes == 1440) == whole_day
    assert sorted((row.service_class, row.interval_start, row.ended_count) for row in hourly if row.interval_minutes == 60) == [
        ("FAST", START, 3),
        ("FAST", START + timedelta(hours=23), 1),
        ("PCT", START, 1),
    ]
    with pytest.raises(ValueError, match="must divide a day"):
        report_rows(spark, records, interval_minutes=7)
    with pytest.raises(ValueError, match="no records"):
        report_rows(spark, None)


def test_intervals_and_the_whole_day(spark: SparkSession) -> None:
    records = [record("FAST", 100, ended=timedelta(minutes=m)) for m in (1, 14, 16, 23 * 60 + 59)]
    rows = report(spark, records)
    assert rows[("FAST", 1, 15, START, 1)].ended_count == 2
    assert rows[("FAST", 1, 15, START + timedelta(minutes=15), 1)].ended_count == 1
    assert rows[("FAST", 1, 15, START + timedelta(hours=23, minutes=45), 1)].ended_count == 1
    assert day_row(rows, "FAST").ended_count == 4
    # Intervals without requests have no row.
    assert len([key for key in rows if key[2] == 15]) == 3


def test_the_goal_is_the_one_active_when_the_request_ended(spark: SparkSession) -> None:
    faster = {
        **POLICY,
        "service_classes": [
            {**POLICY["service_classes"][0], "goal": {"type": "average", "response_time_ms": 50}},
            *POLICY["service_classes"][1:],
        ],
    }
    v2 = PolicyVersionInfo(2, MIDNIGHT + timedelta(hours=12), faster)
    rows = report(spark, [record("FAST", 100, ended=timedelta(hours=11)), record("FAST", 100, ended=timedelta(hours=13))], [V1, v2])
    assert day_row(rows, "FAST", version=1).performance_index == 1.0
    assert day_row(rows, "FAST", version=2).performance_index == 2.0
    assert day_row(rows, "FAST", version=2).goal_ms == 50


def test_the_groups_declared_by_the_files_name_the_report_as_the_records_do(spark: SparkSession) -> None:
    # A policy change at noon: the declared keys carry each record's own version, the report the active one.
    faster = {
        **POLICY,
        "service_classes": [
            {**POLICY["service_classes"][0], "goal": {"type": "average", "response_time_ms": 50}},
            *POLICY["service_classes"][1:],
        ],
    }
    versions = [V1, PolicyVersionInfo(2, MIDNIGHT + timedelta(hours=12), faster)]
    records = [
        record("FAST", 100, ended=timedelta(hours=11), report_class="ATMA"),
        record("FAST", 100, ended=timedelta(hours=13)),
        record("PCT", 80, ended=timedelta(hours=13)),
        record("TWO", 3000, period=2, report_class="RPTS"),
    ]
    by_scan = report_rows(spark, records, versions)
    by_footers = report_rows(spark, records, versions, declared_keys=group_keys(records))
    assert len(by_scan) == 8 and sorted(by_footers) == sorted(by_scan)
    assert {(r.service_class, r.policy_version, r.report_class) for r in by_footers} == {
        ("FAST", 1, "ATMA"),
        ("FAST", 2, ""),
        ("PCT", 2, ""),
        ("TWO", 1, "RPTS"),
    }


def test_records_of_other_days_are_left_out_and_an_empty_day_has_no_rows(spark: SparkSession) -> None:
    assert report(spark, [record("FAST", 100, ended=timedelta(days=1, minutes=1)), record("FAST", 100, ended=-timedelta(minutes=1))]) == {}
    assert report(spark, []) == {}


def test_report_classes_and_environments_are_groups_of_their_own(spark: SparkSession) -> None:
    rows = report_rows(spark, [record("FAST", 100, report_class="ATMA"), record("FAST", 100), record("FAST", 300, report_class="ATMA")])
    by_report_class = {r.report_class: r for r in rows if r.interval_minutes == 1440}
    assert by_report_class["ATMA"].ended_count == 2 and by_report_class[""].ended_count == 1


def test_agrees_with_the_live_evaluation_of_the_same_requests(spark: SparkSession) -> None:
    """Random requests under 100 ms (where the report's bins are exact, and goals of 50 ms so they fall in every
    bucket up to 200%): every figure the live evaluation (spark_jobs.manager.goals.evaluate) computes is the same in the
    nightly report."""
    generator = random.Random(7)
    goals = {
        "FAST": AverageGoal(type="average", response_time_ms=50),
        "PCT": PercentileGoal(type="percentile", percentile=90, response_time_ms=50),
        "VEL": VelocityGoal(type="velocity", velocity=50),
    }
    policy = {**POLICY, "service_classes": [{"name": name, "importance": 1, "goal": goal.model_dump()} for name, goal in goals.items()]}
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in goals}
    records = []
    for name in goals:
        for _ in range(300):
            response = generator.randint(1, 99)
            queue = generator.randint(0, response)
            samples[name].append((response, queue, response - queue))
            records.append(record(name, response, queue_ms=queue, ended=timedelta(minutes=generator.randint(0, 14))))
    rows = report(spark, records, [PolicyVersionInfo(1, V1.installed_at, policy)])
    for name, goal in goals.items():
        live = evaluate(goal.rule(), samples[name])
        row = rows[(name, 1, 15, START, 1)]
        assert row.ended_count == live.ended
        assert row.response_avg_ms == pytest.approx(live.avg_response_ms)
        assert (row.response_p50_ms, row.response_p90_ms, row.response_p99_ms) == (
            live.p50_response_ms,
            live.p90_response_ms,
            live.p99_response_ms,
        )
        assert row.execution_velocity == pytest.approx(live.velocity)
        assert row.performance_index == pytest.approx(live.pi)
        assert row.goal_met_share == pytest.approx(live.goal_met_share)
        if live.distribution is not None:
            assert tuple(row.buckets) == live.distribution


def test_percentiles_above_100_ms_are_less_than_1_percent_above_the_exact_ones(spark: SparkSession) -> None:
    generator = random.Random(11)
    responses = [int(generator.lognormvariate(8, 2)) + 100 for _ in range(2000)]
    row = day_row(report(spark, [record("FAST", r, queue_ms=0) for r in responses]), "FAST")
    ranked = sorted(responses)
    for percentile, reported in zip((50, 90, 99), (row.response_p50_ms, row.response_p90_ms, row.response_p99_ms), strict=True):
        exact = ranked[-(-percentile * len(ranked) // 100) - 1]  # nearest rank
        assert exact <= reported < exact * 1.01
