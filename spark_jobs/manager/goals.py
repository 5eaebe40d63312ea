"""Goals and the performance index (PI): how well a service class did over a window of ended requests.

Pure functions, no I/O. The PI follows z/OS WLM: PI ≤ 1 means the goal was met, above 1 it was missed, and the
further from 1 the larger the miss or the margin.

- average goal: PI = actual average response time / goal.
- velocity goal: PI = goal velocity / actual velocity, where velocity = 100 × execution / (execution + queue delay).
- percentile goal: the ended requests are counted into 14 buckets by their response time as a share of the goal
  (≤50%, ≤60%, …, ≤150%, ≤200%, ≤400%, >400%); PI = the limit of the first bucket whose cumulative share reaches the
  percentile, divided by 100 (so "90% within ≤80% of the goal" has PI 0.8).
- discretionary: no goal; PI is always 0.81, which reads as "met with room to spare" and never attracts resources.

A window without ended requests has an unknown PI (None), except for discretionary work. A request is judged in
the period its response time reached (`period_number`); the other functions see one period's goal and samples. The
buckets and the PI's fixed points are in spark_jobs/contract/goals.py: the nightly report judges by them too. The
service's goal evaluation (app/servers/performance.py) and the what-if simulation judge by these functions.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import assert_never

from spark_jobs.contract.goals import (
    BUCKET_COUNT,
    DISCRETIONARY_PI,
    MAX_VELOCITY_PI,
    TOLERANT_BUCKET_LIMITS_PCT,
    WITHIN_GOAL_BUCKETS,
    bucket_pi,
)
from spark_jobs.manager.policy import AverageGoal, DiscretionaryGoal, Goal, PercentileGoal, VelocityGoal

# One ended request: (response_ms, queue_ms, execution_ms).
Sample = tuple[float, float, float]


def period_number(durations: Sequence[int | None], elapsed_ms: float) -> int:
    """The 1-based period a request is in after `elapsed_ms`, of periods lasting `durations` (None: the last,
    open-ended): it moves on when a period's duration is used up."""
    boundary = 0
    for number, duration_ms in enumerate(durations, 1):
        if duration_ms is None:
            return number
        boundary += duration_ms
        if elapsed_ms < boundary:
            return number
    return len(durations)


def _check_duration(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite duration >= 0, got {value!r}")


def _check_goal_ms(goal_ms: float) -> None:
    if not math.isfinite(goal_ms) or goal_ms <= 0:
        raise ValueError(f"goal_ms must be finite and > 0, got {goal_ms!r}")


def bucket_index(response_ms: float, goal_ms: float) -> int:
    """The bucket (0..13) of a response: the first whose limit, in percent of `goal_ms`, it does not exceed."""
    _check_duration("response_ms", response_ms)
    _check_goal_ms(goal_ms)
    return bisect_left(TOLERANT_BUCKET_LIMITS_PCT, response_ms * 100 / goal_ms)


def distribution(responses_ms: Iterable[float], goal_ms: float) -> tuple[int, ...]:
    """How many of `responses_ms` fall into each of the 14 buckets of `goal_ms`."""
    counts = [0] * BUCKET_COUNT
    for response_ms in responses_ms:
        counts[bucket_index(response_ms, goal_ms)] += 1
    return tuple(counts)


def sorted_distribution(sorted_responses_ms: Sequence[float], goal_ms: float) -> tuple[int, ...]:
    """`distribution` of responses given in ascending order (checked by the caller), by a search per bucket: a
    response's share of the goal grows with it, so each bucket's limit splits them once."""
    _check_goal_ms(goal_ms)
    within = [
        bisect_right(sorted_responses_ms, limit, key=lambda response_ms: response_ms * 100 / goal_ms)
        for limit in TOLERANT_BUCKET_LIMITS_PCT
    ]
    within.append(len(sorted_responses_ms))
    return tuple(count - before for before, count in zip([0, *within[:-1]], within, strict=True))


def average_pi(actual_avg_ms: float | None, goal_ms: float) -> float | None:
    """PI of an average response time goal: actual / goal; None when nothing ended (no average)."""
    _check_goal_ms(goal_ms)
    if actual_avg_ms is None:
        return None
    _check_duration("actual_avg_ms", actual_avg_ms)
    return actual_avg_ms / goal_ms


def velocity_pi(actual_velocity: float | None, goal_velocity: float) -> float | None:
    """PI of a velocity goal: goal / actual, capped at MAX_VELOCITY_PI; None when the velocity is unknown."""
    if not 0 < goal_velocity <= 100:
        raise ValueError(f"goal_velocity must be in (0, 100], got {goal_velocity!r}")
    if actual_velocity is None:
        return None
    if not 0 <= actual_velocity <= 100:
        raise ValueError(f"actual_velocity must be in [0, 100], got {actual_velocity!r}")
    if actual_velocity * MAX_VELOCITY_PI <= goal_velocity:
        return MAX_VELOCITY_PI
    return goal_velocity / actual_velocity


def percentile_pi(bucket_counts: Sequence[int], percentile: float) -> float | None:
    """PI of a percentile goal from a 14-bucket distribution; None when the distribution is empty."""
    if len(bucket_counts) != BUCKET_COUNT:
        raise ValueError(f"a distribution has {BUCKET_COUNT} buckets, got {len(bucket_counts)}")
    if any(count < 0 for count in bucket_counts):
        raise ValueError("bucket counts must be >= 0")
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {percentile!r}")
    total = sum(bucket_counts)
    if total == 0:
        return None
    cumulative = 0
    for index, count in enumerate(bucket_counts):
        cumulative += count
        # Compared as cumulative/total >= percentile/100, multiplied out so integer counts stay exact.
        if cumulative * 100 >= percentile * total:
            return bucket_pi(index)
    raise AssertionError("unreachable: the last bucket's cumulative share is 100%")


def execution_velocity(execution_ms_total: float, queue_delay_ms_total: float) -> float | None:
    """100 × execution / (execution + queue delay); None when neither took any time (nothing to judge)."""
    _check_duration("execution_ms_total", execution_ms_total)
    _check_duration("queue_delay_ms_total", queue_delay_ms_total)
    elapsed = execution_ms_total + queue_delay_ms_total
    if elapsed == 0:
        return None
    # The share first: it is at most 1 exactly, where 100 × e / e can round above 100 (e = 89185.19...).
    return 100 * (execution_ms_total / elapsed)


def nearest_rank_percentile(sorted_values: Sequence[float], percentile: int) -> float | None:
    """The nearest-rank percentile of ascending `sorted_values`: the smallest value with at least `percentile`% of
    the values at or below it; None for no values. Nearest rank returns an observed response, never an interpolation."""
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {percentile!r}")
    if not sorted_values:
        return None
    rank = -(-percentile * len(sorted_values) // 100)  # ceil(percentile/100 × n) in integers
    return sorted_values[rank - 1]


def window_pi(goal: Goal, avg_response_ms: float | None, bucket_counts: Sequence[int] | None, velocity: float | None) -> float | None:
    """The PI of a window from its figures: its average response time, its 14 buckets of the goal's response time
    (for a goal that has one) and its velocity. `evaluate` judges by it, and so does a caller that keeps the figures
    itself (the what-if simulation keeps them as its window moves)."""
    match goal:
        case AverageGoal():
            return average_pi(avg_response_ms, goal.response_time_ms)
        case PercentileGoal():
            assert bucket_counts is not None, "a percentile goal is judged by its buckets"
            return percentile_pi(bucket_counts, goal.percentile)
        case VelocityGoal():
            return velocity_pi(velocity, goal.velocity)
        case DiscretionaryGoal():
            return DISCRETIONARY_PI
        case _:
            assert_never(goal)


def _check_samples(window: Sequence[Sample]) -> None:
    """Every time of every sample a finite duration >= 0: checked a column at a time (a window holds up to 10,000),
    and sample by sample only to name the first that is not."""
    if _durations(*zip(*window, strict=True)):
        return
    for response_ms, queue_ms, execution_ms in window:
        _check_duration("response_ms", response_ms)
        _check_duration("queue_ms", queue_ms)
        _check_duration("execution_ms", execution_ms)


@dataclass(frozen=True, slots=True)
class ClassPerformance:
    """A service class period over one window of ended requests. Averages are None when nothing ended."""

    goal_type: str
    ended: int
    avg_response_ms: float | None
    p50_response_ms: float | None
    p90_response_ms: float | None
    p99_response_ms: float | None
    avg_queue_ms: float | None
    avg_execution_ms: float | None
    # Of the window as a whole: total execution over total execution + queue delay.
    velocity: float | None
    # 14 bucket counts; None for goals without a response time (velocity, discretionary).
    distribution: tuple[int, ...] | None
    pi: float | None
    # Share (0..1) of ended requests that met the goal on their own; None without a goal or without requests.
    goal_met_share: float | None

    @property
    def goal_met(self) -> bool | None:
        return None if self.pi is None else self.pi <= 1


def evaluate(goal: Goal, samples: Iterable[Sample]) -> ClassPerformance:
    """Summarise the ended requests `samples` of one window against `goal`."""
    window = list(samples)
    _check_samples(window)
    return _evaluated(goal, [s[0] for s in window], [s[1] for s in window], [s[2] for s in window])


def evaluate_columns(
    goal: Goal, responses_ms: Sequence[float], queues_ms: Sequence[float], executions_ms: Sequence[float]
) -> ClassPerformance:
    """`evaluate` of a window given as its samples' three columns (a what-if's whole day holds millions)."""
    if not len(responses_ms) == len(queues_ms) == len(executions_ms):
        raise ValueError("the columns of a window have one value per sample")
    if not _durations(responses_ms, queues_ms, executions_ms):
        _check_samples(list(zip(responses_ms, queues_ms, executions_ms, strict=True)))  # names the first that is not
    return _evaluated(goal, responses_ms, queues_ms, executions_ms)


def _durations(*columns: Sequence[float]) -> bool:
    """Whether every value of `columns` is a finite duration >= 0."""
    try:
        return all(not column or (min(column) >= 0 and math.isfinite(math.fsum(column))) for column in columns)
    except OverflowError:  # finite values whose sum is not
        return all(math.isfinite(value) and value >= 0 for column in columns for value in column)


def _evaluated(goal: Goal, responses_ms: Sequence[float], queues_ms: Sequence[float], executions_ms: Sequence[float]) -> ClassPerformance:
    ended = len(responses_ms)
    responses = sorted(responses_ms)
    queue_total = math.fsum(queues_ms)
    execution_total = math.fsum(executions_ms)
    avg_response_ms = math.fsum(responses) / ended if ended else None
    velocity = execution_velocity(execution_total, queue_total)

    bucket_counts: tuple[int, ...] | None = None
    goal_met_share: float | None = None
    match goal:
        case AverageGoal() | PercentileGoal():
            bucket_counts = sorted_distribution(responses, goal.response_time_ms)
            goal_met_share = _within_goal_share(bucket_counts)
        case VelocityGoal():
            goal_met_share = _velocity_met_share(queues_ms, executions_ms, goal.velocity)
    pi = window_pi(goal, avg_response_ms, bucket_counts, velocity)

    return ClassPerformance(
        goal_type=goal.type,
        ended=ended,
        avg_response_ms=avg_response_ms,
        p50_response_ms=nearest_rank_percentile(responses, 50),
        p90_response_ms=nearest_rank_percentile(responses, 90),
        p99_response_ms=nearest_rank_percentile(responses, 99),
        avg_queue_ms=queue_total / ended if ended else None,
        avg_execution_ms=execution_total / ended if ended else None,
        velocity=velocity,
        distribution=bucket_counts,
        pi=pi,
        goal_met_share=goal_met_share,
    )


def _within_goal_share(bucket_counts: tuple[int, ...]) -> float | None:
    total = sum(bucket_counts)
    return sum(bucket_counts[:WITHIN_GOAL_BUCKETS]) / total if total else None


def _velocity_met_share(queues_ms: Sequence[float], executions_ms: Sequence[float], goal_velocity: int) -> float | None:
    # A request that took no measurable time has no velocity; it is left out rather than counted either way.
    velocities = [
        v
        for queue_ms, execution_ms in zip(queues_ms, executions_ms, strict=True)
        if (v := execution_velocity(execution_ms, queue_ms)) is not None
    ]
    if not velocities:
        return None
    return sum(1 for v in velocities if v >= goal_velocity) / len(velocities)
