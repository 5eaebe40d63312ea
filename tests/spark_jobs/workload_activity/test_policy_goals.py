"""Which policy version's goal a report row is measured against (pure), and the job's reading of a stored
definition held to the service's own compile_policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from app.policy.active import compile_policy
from app.policy.schemas import AverageGoal, PercentileGoal, VelocityGoal
from app.policy.service import parse_definition
from spark_jobs.workload_activity.policy_goals import ActivationStep, GoalRow, PolicyVersionInfo, activation_steps, goal_rows
from tests.conftest import EXAMPLE_POLICY

START = datetime(2026, 11, 20, tzinfo=UTC)
END = START + timedelta(days=1)


def definition(*classes: dict) -> dict:
    return {"name": "P", "service_classes": list(classes)}


FAST = {"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": 100}}
GONE = {"name": "GONE", "importance": 2, "goal": {"type": "percentile", "percentile": 80, "response_time_ms": 300}}


def version(number: int, installed: datetime) -> PolicyVersionInfo:
    return PolicyVersionInfo(number, installed, definition(FAST))


def test_the_version_active_at_the_start_and_each_installed_during_the_day() -> None:
    versions = [
        version(1, START - timedelta(days=9)),
        version(2, START - timedelta(hours=1)),
        version(3, START + timedelta(hours=6)),
        version(4, END),
    ]
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


def stored(document: dict[str, Any]) -> dict[str, Any]:
    """`document` as the service stores an installed definition (app/policy/service.py install_policy)."""
    return parse_definition(document).model_dump(mode="json", exclude_none=True)


def compiled_goals(version: int, document: dict[str, Any]) -> list[GoalRow]:
    """The goal of every service class period as the service itself compiles the definition."""
    rows = []
    for spec in compile_policy(version, parse_definition(document)).service_classes.values():
        for period in spec.periods:
            goal = period.goal
            rows.append(
                GoalRow(
                    policy_version=version,
                    service_class=spec.name,
                    period=period.number,
                    goal_type=goal.type,
                    goal_ms=goal.response_time_ms if isinstance(goal, AverageGoal | PercentileGoal) else None,
                    goal_percentile=goal.percentile if isinstance(goal, PercentileGoal) else None,
                    goal_velocity=goal.velocity if isinstance(goal, VelocityGoal) else None,
                    importance=period.importance,
                )
            )
    return rows


def classes(*service_classes: dict[str, Any]) -> dict[str, Any]:
    return {"name": "VARIED", "service_classes": list(service_classes)}


AVERAGE = {"type": "average", "response_time_ms": 2000}
PERCENTILE = {"type": "percentile", "percentile": 95, "response_time_ms": 86_400_000}
VELOCITY = {"type": "velocity", "velocity": 1}
DISCRETIONARY = {"type": "discretionary"}


@pytest.mark.parametrize(
    "document",
    [
        yaml.safe_load(EXAMPLE_POLICY),
        classes({"name": "ONLY", "importance": 5, "goal": VELOCITY}),
        classes({"name": "IDLE", "goal": DISCRETIONARY}, {"name": "FAST", "description": "d", "importance": 1, "goal": PERCENTILE}),
        classes(
            {
                "name": "STAGED",
                "periods": [
                    {"duration_ms": 100, "importance": 1, "goal": PERCENTILE},
                    {"duration_ms": 5000, "importance": 2, "goal": AVERAGE},
                    {"duration_ms": 60_000, "importance": 5, "goal": VELOCITY},
                    {"goal": DISCRETIONARY},
                ],
            },
            {"name": "TWO", "periods": [{"duration_ms": 1, "importance": 3, "goal": VELOCITY}, {"importance": 4, "goal": AVERAGE}]},
        ),
        classes(*({"name": f"C{i}", "importance": 1 + i % 5, "goal": (AVERAGE, PERCENTILE, VELOCITY)[i % 3]} for i in range(12))),
    ],
    ids=["example", "one-velocity", "discretionary-and-percentile", "periods", "many"],
)
def test_the_job_reads_a_stored_definition_as_the_service_compiles_it(document: dict[str, Any]) -> None:
    from_storage = goal_rows([PolicyVersionInfo(7, START, stored(document))])
    assert from_storage == compiled_goals(7, document)
