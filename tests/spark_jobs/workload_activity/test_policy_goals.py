"""Which policy version's goal a report row is measured against (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow, PolicyVersionInfo, activation_steps, goal_rows

START = datetime(2026, 11, 20, tzinfo=UTC)
END = START + timedelta(days=1)


def definition(*classes: dict) -> dict:
    return {"name": "P", "service_classes": list(classes)}


FAST = {"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": 100}}
GONE = {"name": "GONE", "importance": 2, "goal": {"type": "percentile", "percentile": 80, "response_time_ms": 300}}


def version(number: int, installed: datetime) -> PolicyVersionInfo:
    return PolicyVersionInfo(number, installed, definition(FAST))


def test_the_version_active_at_the_start_and_each_installed_during_the_day() -> None:
    versions = [version(1, START - timedelta(days=9)), version(2, START - timedelta(hours=1)), version(3, START + timedelta(hours=6)), version(4, END)]
    assert activation_steps(versions, START, END) == [ActivationStep(START, 2), ActivationStep(START + timedelta(hours=6), 3)]


def test_no_version_before_the_day_and_none_installed_in_it() -> None:
    assert activation_steps([], START, END) == []
    assert activation_steps([version(1, END + timedelta(hours=1))], START, END) == []


def test_a_lower_version_installed_later_never_becomes_active() -> None:
    # The active policy is the highest version.
    versions = [version(5, START + timedelta(hours=1)), version(4, START + timedelta(hours=2))]
    assert activation_steps(versions, START, END) == [ActivationStep(START + timedelta(hours=1), 5)]


def test_goals_of_every_period_with_a_removed_class_kept_from_its_last_definition() -> None:
    v1 = PolicyVersionInfo(1, START, definition(FAST, GONE))
    v2 = PolicyVersionInfo(2, START, definition({**FAST, "goal": {"type": "velocity", "velocity": 40}}))
    rows = {(row.policy_version, row.service_class, row.period): row for row in goal_rows([v2, v1])}
    assert rows[(1, "FAST", 1)] == GoalRow(1, "FAST", 1, "average", 100, None, None, 1)
    assert rows[(2, "FAST", 1)] == GoalRow(2, "FAST", 1, "velocity", None, None, 40, 1)
    assert rows[(2, "GONE", 1)] == GoalRow(2, "GONE", 1, "percentile", 300, 80, None, 2)
    # Work no rule classifies (SYSOTHER) is discretionary in every version.
    assert rows[(2, "SYSOTHER", 1)].goal_type == "discretionary"
