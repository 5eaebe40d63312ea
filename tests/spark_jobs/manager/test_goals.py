"""Goals and the performance index (spark_jobs/manager/goals.py): pure, table-driven, expected values worked out by hand."""

from __future__ import annotations

import math

import pytest

from app.policy.schemas import PercentileGoal
from spark_jobs.contract.goals import (
    BUCKET_COUNT,
    BUCKET_LABELS,
    DISCRETIONARY_PI,
    MAX_VELOCITY_PI,
    OVERFLOW_BUCKET_PI,
    RESPONSE_BUCKET_LIMITS_PCT,
)
from spark_jobs.manager.goals import (
    ClassPerformance,
    Sample,
    average_pi,
    bucket_index,
    distribution,
    evaluate,
    execution_velocity,
    nearest_rank_percentile,
    percentile_pi,
    period_number,
    velocity_pi,
)
from spark_jobs.manager.policy import Goal
from tests.goal_builders import DISCRETIONARY, average, percentile, velocity


def counts(**by_bucket: int) -> tuple[int, ...]:
    """A 14-bucket distribution from keyword counts: counts(b0=5, b13=1)."""
    result = [0] * BUCKET_COUNT
    for key, count in by_bucket.items():
        result[int(key[1:])] = count
    return tuple(result)


# --------------------------------------------------------------------------------------------------------------------
# Buckets
# --------------------------------------------------------------------------------------------------------------------


def test_bucket_layout() -> None:
    assert RESPONSE_BUCKET_LIMITS_PCT == (50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 200, 400)
    assert BUCKET_COUNT == 14
    assert BUCKET_LABELS[0] == "<=50%" and BUCKET_LABELS[12] == "<=400%" and BUCKET_LABELS[13] == ">400%"


# Goal 1000 ms, so a limit of L% is L × 10 ms: exactly on the limit stays in the bucket, 1 ms above moves to the next.
BOUNDARIES = [(limit * 10, index) for index, limit in enumerate(RESPONSE_BUCKET_LIMITS_PCT)]
JUST_ABOVE = [(limit * 10 + 1, index + 1) for index, limit in enumerate(RESPONSE_BUCKET_LIMITS_PCT)]


@pytest.mark.parametrize(("response_ms", "expected"), BOUNDARIES + JUST_ABOVE)
def test_bucket_boundaries_of_a_1000_ms_goal(response_ms: int, expected: int) -> None:
    assert bucket_index(response_ms, 1000) == expected


@pytest.mark.parametrize(
    ("response_ms", "goal_ms", "expected"),
    [
        (0, 1000, 0),  # an instant response is ≤50%
        (499.999, 1000, 0),
        (500.001, 1000, 1),  # 50.0001% > 50%
        (10**9, 1000, 13),  # far beyond 400%
        (4000, 1000, 12),  # 400% exactly: the last bounded bucket
        (0.25, 0.5, 0),  # 50% exactly with fractional milliseconds
        (7.0, 10, 2),  # 70% exactly
        (3, 2, 10),  # 150% exactly: the ≤150% bucket
        (200, 100, 11),  # 200% exactly
        (201, 100, 12),  # 201% → ≤400%
        # Float noise on a limit does not move a response to the next bucket:
        (0.7, 1.0, 2),  # 0.7 × 100 / 1.0 = 70.00000000000001 → still ≤70%
        (1.1, 1, 6),  # 110.00000000000001 → still ≤110%
        (0.1 + 0.2, 0.5, 1),  # 0.30000000000000004 / 0.5 = 60.00000000000001% → still ≤60%
        (0.6000001, 1.0, 2),  # 60.00001%: a real excess (1e-7 of the goal), not noise → ≤70%
    ],
)
def test_bucket_index_other_goals(response_ms: float, goal_ms: float, expected: int) -> None:
    assert bucket_index(response_ms, goal_ms) == expected


@pytest.mark.parametrize(
    ("response_ms", "goal_ms"),
    [(-1, 1000), (math.nan, 1000), (math.inf, 1000), (100, 0), (100, -5), (100, math.inf), (100, math.nan)],
)
def test_bucket_index_refuses_impossible_durations(response_ms: float, goal_ms: float) -> None:
    with pytest.raises(ValueError):
        bucket_index(response_ms, goal_ms)


def test_distribution_counts_each_bucket() -> None:
    # goal 1000 ms: 0 → b0, 500 → b0, 501 → b1, 1000 → b5, 1001 → b6, 4000 → b12, 4001 → b13, 99999 → b13
    responses = [0, 500, 501, 1000, 1001, 4000, 4001, 99999]
    assert distribution(responses, 1000) == counts(b0=2, b1=1, b5=1, b6=1, b12=1, b13=2)


def test_distribution_of_nothing_is_fourteen_zeros() -> None:
    assert distribution([], 1000) == (0,) * 14


def test_distribution_accepts_any_iterable() -> None:
    assert distribution((ms for ms in (100, 950)), 1000) == counts(b0=1, b5=1)


# --------------------------------------------------------------------------------------------------------------------
# Performance index per goal type
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actual_avg_ms", "goal_ms", "expected"),
    [
        (1200, 1000, 1.2),  # 1200 / 1000
        (500, 1000, 0.5),  # 500 / 1000
        (1000, 1000, 1.0),  # exactly on the goal
        (0, 1000, 0.0),
        (30, 20, 1.5),  # 30 / 20
        (None, 1000, None),  # nothing ended: unknown
    ],
)
def test_average_pi(actual_avg_ms: float | None, goal_ms: float, expected: float | None) -> None:
    assert average_pi(actual_avg_ms, goal_ms) == expected


@pytest.mark.parametrize(
    ("actual_velocity", "goal_velocity", "expected"),
    [
        (50, 25, 0.5),  # 25 / 50: twice as fast as asked
        (20, 40, 2.0),  # 40 / 20
        (100, 99, 0.99),  # 99 / 100
        (40, 40, 1.0),
        (0.5, 50, MAX_VELOCITY_PI),  # 50 / 0.5 = 100: exactly the cap
        (0.25, 50, MAX_VELOCITY_PI),  # 50 / 0.25 = 200, capped at 100
        (0, 50, MAX_VELOCITY_PI),  # work that only waited: capped instead of dividing by zero
        (None, 50, None),  # no velocity (nothing ended, or nothing took time): unknown
    ],
)
def test_velocity_pi(actual_velocity: float | None, goal_velocity: float, expected: float | None) -> None:
    pi = velocity_pi(actual_velocity, goal_velocity)
    assert pi is None if expected is None else pi == pytest.approx(expected)


@pytest.mark.parametrize(("actual_velocity", "goal_velocity"), [(-1, 50), (101, 50), (50, 0), (50, 101)])
def test_velocity_pi_refuses_out_of_range(actual_velocity: float, goal_velocity: float) -> None:
    with pytest.raises(ValueError):
        velocity_pi(actual_velocity, goal_velocity)


@pytest.mark.parametrize(
    ("bucket_counts", "pct", "expected"),
    [
        # all 10 in ≤50%: any percentile is reached in bucket 0 → 50 / 100
        (counts(b0=10), 90, 0.5),
        # 5 in b0, 4 in b4 (≤90%), 1 in b6 (≤110%); cumulative shares 50%, 90%, 100%
        (counts(b0=5, b4=4, b6=1), 50, 0.5),  # 50% reached in b0
        (counts(b0=5, b4=4, b6=1), 51, 0.9),  # 51% first reached at b4 (90%)
        (counts(b0=5, b4=4, b6=1), 90, 0.9),  # 90% reached exactly at b4
        (counts(b0=5, b4=4, b6=1), 91, 1.1),  # needs b6
        (counts(b0=5, b4=4, b6=1), 99, 1.1),
        # 99 within the goal (b5, ≤100%), 1 beyond 400%: p99 is met exactly, p100 is not
        (counts(b5=99, b13=1), 99, 1.0),
        (counts(b5=99, b13=1), 100, OVERFLOW_BUCKET_PI),
        # leading empty buckets are skipped
        (counts(b2=3), 10, 0.7),
        # everything beyond 400%: the overflow bucket's PI
        (counts(b13=7), 1, OVERFLOW_BUCKET_PI),
        # each bounded bucket's PI is its limit / 100
        *[(counts(**{f"b{i}": 1}), 50, limit / 100) for i, limit in enumerate(RESPONSE_BUCKET_LIMITS_PCT)],
        # 3 requests, p67: 2/3 = 66.67% < 67% at b1, so b3 (3/3) → 0.8
        (counts(b0=1, b1=1, b3=1), 67, 0.8),
        # 3 requests, p66: 2/3 ≥ 66% at b1 → 0.6
        (counts(b0=1, b1=1, b3=1), 66, 0.6),
        # empty window: unknown
        (counts(), 90, None),
    ],
)
def test_percentile_pi(bucket_counts: tuple[int, ...], pct: float, expected: float | None) -> None:
    assert percentile_pi(bucket_counts, pct) == expected


def test_overflow_pi_orders_just_above_the_400_percent_bucket() -> None:
    overflow, last_bounded = percentile_pi(counts(b13=1), 50), percentile_pi(counts(b12=1), 50)
    assert (overflow, last_bounded) == (4.01, 4.0)


@pytest.mark.parametrize(
    ("bucket_counts", "pct"),
    [((1,) * 13, 50), ((1,) * 15, 50), (counts(b0=-1, b1=2), 50), (counts(b0=1), 0), (counts(b0=1), 101)],
)
def test_percentile_pi_refuses_bad_input(bucket_counts: tuple[int, ...], pct: float) -> None:
    with pytest.raises(ValueError):
        percentile_pi(bucket_counts, pct)


@pytest.mark.parametrize(
    ("execution_ms", "queue_ms", "expected"),
    [
        (300, 100, 75.0),  # 100 × 300 / 400
        (100, 0, 100.0),  # never waited
        (0, 100, 0.0),  # only waited
        (1, 3, 25.0),  # 100 × 1 / 4
        (0, 0, None),  # nothing took any time: nothing to judge
    ],
)
def test_execution_velocity(execution_ms: float, queue_ms: float, expected: float | None) -> None:
    assert execution_velocity(execution_ms, queue_ms) == expected


@pytest.mark.parametrize("execution_ms", [89185.19253545631, 43803.7811912645, 0.1, 1e-300])
def test_execution_velocity_without_queue_delay_is_100_exactly(execution_ms: float) -> None:
    # 100 × e / e rounds above 100 for these (a replay's request selected as it arrives): velocity_pi refused it.
    assert execution_velocity(execution_ms, 0) == 100
    assert velocity_pi(execution_velocity(execution_ms, 0), 50) == 0.5


@pytest.mark.parametrize(("execution_ms", "queue_ms"), [(-1, 0), (0, -1), (math.nan, 1)])
def test_execution_velocity_refuses_negative_time(execution_ms: float, queue_ms: float) -> None:
    with pytest.raises(ValueError):
        execution_velocity(execution_ms, queue_ms)


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        (list(range(1, 11)), 50, 5),  # rank ceil(0.5 × 10) = 5
        (list(range(1, 11)), 90, 9),  # rank ceil(0.9 × 10) = 9
        (list(range(1, 11)), 99, 10),  # rank ceil(0.99 × 10) = 10
        (list(range(1, 11)), 100, 10),
        (list(range(1, 11)), 1, 1),  # rank ceil(0.1) = 1
        ([7], 50, 7),
        ([10, 20, 30], 34, 20),  # rank ceil(1.02) = 2
        ([10, 20, 30], 33, 10),  # rank ceil(0.99) = 1
        ([], 50, None),
    ],
)
def test_nearest_rank_percentile(values: list[float], pct: int, expected: float | None) -> None:
    assert nearest_rank_percentile(values, pct) == expected


@pytest.mark.parametrize("pct", [0, 101, -5])
def test_nearest_rank_percentile_refuses_out_of_range(pct: int) -> None:
    with pytest.raises(ValueError):
        nearest_rank_percentile([1.0], pct)


# --------------------------------------------------------------------------------------------------------------------
# evaluate: one window of samples (response_ms, queue_ms, execution_ms)
# --------------------------------------------------------------------------------------------------------------------

# Four ended requests. Responses sorted 400, 900, 1200, 1500 (sum 4000, average 1000).
# Against a 1000 ms goal: 40% → b0, 90% → b4, 120% → b7, 150% → b10; two of four within the goal.
# Queue 100 + 300 + 500 + 200 = 1100 (average 275); execution 300 + 600 + 1000 + 1000 = 2900 (average 725).
# Window velocity 100 × 2900 / (2900 + 1100) = 72.5.
# Per-request velocities 300/400 = 75, 600/900 = 66.7, 1000/1500 = 66.7, 1000/1200 = 83.3.
# Nearest rank: p50 = 2nd = 900, p90 = 4th (ceil 3.6) = 1500, p99 = 4th = 1500.
WINDOW: list[Sample] = [(400, 100, 300), (900, 300, 600), (1500, 500, 1000), (1200, 200, 1000)]
WINDOW_DISTRIBUTION = counts(b0=1, b4=1, b7=1, b10=1)


def test_evaluate_average_goal_summarises_the_window() -> None:
    assert evaluate(average(1000), WINDOW) == ClassPerformance(
        goal_type="average",
        ended=4,
        avg_response_ms=1000.0,
        p50_response_ms=900,
        p90_response_ms=1500,
        p99_response_ms=1500,
        avg_queue_ms=275.0,
        avg_execution_ms=725.0,
        velocity=72.5,
        distribution=WINDOW_DISTRIBUTION,
        pi=1.0,  # 1000 / 1000
        goal_met_share=0.5,  # 400 and 900 within 1000
    )


@pytest.mark.parametrize(
    ("goal", "pi", "goal_met_share"),
    [
        (average(1000), 1.0, 0.5),  # 1000 / 1000
        (average(2000), 0.5, 1.0),  # 1000 / 2000; all within 2000
        (average(800), 1.25, 0.25),  # 1000 / 800; only 400 within 800
        (percentile(50, 1000), 0.9, 0.5),  # cumulative 25% at b0, 50% at b4 → 0.9
        (percentile(75, 1000), 1.2, 0.5),  # 75% at b7 → 1.2
        (percentile(90, 1000), 1.5, 0.5),  # 100% at b10 → 1.5
        (percentile(25, 1000), 0.5, 0.5),  # 25% at b0 → 0.5
        (velocity(80), 80 / 72.5, 0.25),  # 1.1034…; only 83.3 ≥ 80
        (velocity(70), 70 / 72.5, 0.5),  # 0.9655…; 75 and 83.3 ≥ 70
        (velocity(50), 50 / 72.5, 1.0),  # all ≥ 50
        (DISCRETIONARY, DISCRETIONARY_PI, None),  # no goal to meet
    ],
)
def test_evaluate_pi_and_goal_met_share_per_goal_type(goal: Goal, pi: float, goal_met_share: float | None) -> None:
    performance = evaluate(goal, WINDOW)
    assert performance.pi == pytest.approx(pi)
    assert performance.goal_met_share == goal_met_share
    assert performance.goal_type == goal.type
    assert performance.ended == 4


@pytest.mark.parametrize(
    ("goal", "expected_distribution"),
    [
        (average(1000), WINDOW_DISTRIBUTION),
        (percentile(90, 1000), WINDOW_DISTRIBUTION),
        # goal 500: 80% → b3, 180% → b11, 240% → b12, 300% → b12
        (percentile(90, 500), counts(b3=1, b11=1, b12=2)),
        (velocity(50), None),  # no response time goal to bucket against
        (DISCRETIONARY, None),
    ],
)
def test_evaluate_distribution_only_for_response_time_goals(goal: Goal, expected_distribution: tuple[int, ...] | None) -> None:
    assert evaluate(goal, WINDOW).distribution == expected_distribution


@pytest.mark.parametrize(
    ("goal", "pi", "expected_distribution"),
    [
        (average(1000), None, (0,) * 14),
        (percentile(90, 1000), None, (0,) * 14),
        (velocity(50), None, None),
        (DISCRETIONARY, DISCRETIONARY_PI, None),  # discretionary is 0.81 with or without work
    ],
)
def test_evaluate_empty_window(goal: Goal, pi: float | None, expected_distribution: tuple[int, ...] | None) -> None:
    performance = evaluate(goal, [])
    assert performance == ClassPerformance(
        goal_type=goal.type,
        ended=0,
        avg_response_ms=None,
        p50_response_ms=None,
        p90_response_ms=None,
        p99_response_ms=None,
        avg_queue_ms=None,
        avg_execution_ms=None,
        velocity=None,
        distribution=expected_distribution,
        pi=pi,
        goal_met_share=None,
    )


def test_evaluate_velocity_goal_when_nothing_took_time() -> None:
    # Requests ended with 0 ms queued and 0 ms executing: no velocity, so neither a PI nor a met share.
    performance = evaluate(velocity(50), [(0, 0, 0), (0, 0, 0)])
    assert (performance.ended, performance.velocity, performance.pi, performance.goal_met_share) == (2, None, None, None)


def test_evaluate_velocity_met_share_skips_requests_without_time() -> None:
    # (0,0,0) has no velocity and is left out; (100, 50, 50) has velocity 50 ≥ 40 → 1 of 1.
    # Window velocity 100 × 50 / 100 = 50 → PI 40 / 50 = 0.8.
    performance = evaluate(velocity(40), [(0, 0, 0), (100, 50, 50)])
    assert performance.goal_met_share == 1.0
    assert performance.pi == pytest.approx(0.8)


def test_evaluate_velocity_goal_of_work_that_only_waited_is_capped() -> None:
    performance = evaluate(velocity(50), [(1000, 1000, 0)])
    assert (performance.velocity, performance.pi, performance.goal_met_share) == (0.0, MAX_VELOCITY_PI, 0.0)


def test_evaluate_percentile_goal_beyond_400_percent() -> None:
    # 5000 ms against 1000 ms is 500% → the overflow bucket → PI 4.01
    performance = evaluate(percentile(90, 1000), [(5000, 0, 5000)])
    assert performance.pi == OVERFLOW_BUCKET_PI
    assert performance.distribution == counts(b13=1)


def test_evaluate_accepts_a_generator_and_goals_parsed_from_a_definition() -> None:
    goal = PercentileGoal.model_validate({"type": "percentile", "percentile": 80, "response_time_ms": 200}).rule()
    # 100 ms of 200 → 50% → b0; 190 → 95% → b5; cumulative 50%, 100% → p80 at b5 → 1.0
    performance = evaluate(goal, ((ms, 0, ms) for ms in (100, 190)))
    assert performance.pi == 1.0
    assert performance.distribution == counts(b0=1, b5=1)


@pytest.mark.parametrize(("pi", "met"), [(None, None), (0.81, True), (1.0, True), (1.01, False)])
def test_goal_met_reads_the_pi(pi: float | None, met: bool | None) -> None:
    performance = ClassPerformance("average", 0, None, None, None, None, None, None, None, None, pi, None)
    assert performance.goal_met is met


@pytest.mark.parametrize("sample", [(-1, 0, 0), (0, -1, 0), (0, 0, -1), (math.nan, 0, 0), (0, math.inf, 0)])
def test_evaluate_refuses_impossible_samples(sample: Sample) -> None:
    with pytest.raises(ValueError):
        evaluate(average(1000), [sample])


def test_class_performance_is_frozen() -> None:
    performance = evaluate(DISCRETIONARY, [])
    with pytest.raises(AttributeError):
        performance.pi = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("durations", "elapsed_ms", "period"),
    [
        ([1000, 5000, None], 0, 1),
        ([1000, 5000, None], 999, 1),
        ([1000, 5000, None], 1000, 2),  # the first period's 1000 ms are used up
        ([1000, 5000, None], 5999, 2),
        ([1000, 5000, None], 6000, 3),
        ([1000, 5000, None], 10**9, 3),
        ([None], 10**9, 1),
        ([1000, 5000], 6000, 2),  # every period bounded: the last one holds what outlasts them all
    ],
)
def test_period_number(durations: list[int | None], elapsed_ms: int, period: int) -> None:
    assert period_number(durations, elapsed_ms) == period
