"""Goal models in one line each, for the tables of the goal and server-decision tests."""

from __future__ import annotations

from app.policy.schemas import AverageGoal, DiscretionaryGoal, PercentileGoal, VelocityGoal


def average(goal_ms: int) -> AverageGoal:
    return AverageGoal(type="average", response_time_ms=goal_ms)


def percentile(pct: int, goal_ms: int) -> PercentileGoal:
    return PercentileGoal(type="percentile", percentile=pct, response_time_ms=goal_ms)


def velocity(goal: int) -> VelocityGoal:
    return VelocityGoal(type="velocity", velocity=goal)


DISCRETIONARY = DiscretionaryGoal(type="discretionary")
