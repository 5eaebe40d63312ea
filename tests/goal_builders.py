"""Goals (the rules' plain ones: spark_jobs/manager/policy.py) in one line each, for the tables of the goal and server-decision tests."""

from __future__ import annotations

from spark_jobs.manager.policy import AverageGoal, DiscretionaryGoal, PercentileGoal, VelocityGoal


def average(goal_ms: int) -> AverageGoal:
    return AverageGoal(response_time_ms=goal_ms)


def percentile(pct: int, goal_ms: int) -> PercentileGoal:
    return PercentileGoal(percentile=pct, response_time_ms=goal_ms)


def velocity(goal: int) -> VelocityGoal:
    return VelocityGoal(velocity=goal)


DISCRETIONARY = DiscretionaryGoal()
