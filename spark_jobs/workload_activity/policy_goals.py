"""What the report needs of the policy, as plain data (pure: no Spark, no I/O).

A report row is measured against the goal of the policy version that was active when its requests ended: the
active policy is the highest installed version, so the version active at a time is the highest one installed at or
before it. If that version no longer defines a request's service class period (a class removed while its last
requests were finishing), the latest earlier definition of that period is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from spark_jobs.contract.goals import SYSOTHER


@dataclass(frozen=True, slots=True)
class PolicyVersionInfo:
    version: int
    installed_at: datetime
    definition: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GoalRow:
    """The goal of one service class period as the report measures it under `policy_version`."""

    policy_version: int
    service_class: str
    period: int
    goal_type: str
    goal_ms: int | None
    goal_percentile: int | None
    goal_velocity: int | None
    importance: int | None


@dataclass(frozen=True, slots=True)
class ActivationStep:
    """From `starts_at` on (until the next step), `version` is the active policy."""

    starts_at: datetime
    version: int


def activation_steps(versions: Iterable[PolicyVersionInfo], start: datetime, end: datetime) -> list[ActivationStep]:
    """The versions active during [start, end), in time order: the one active at `start` (if any) and each that
    became active before `end`. A version only becomes active if it is higher than every earlier one."""
    steps: list[ActivationStep] = []
    highest = 0
    for info in sorted(versions, key=lambda v: (v.installed_at, v.version)):
        if info.version <= highest or info.installed_at >= end:
            continue
        highest = info.version
        step = ActivationStep(max(info.installed_at, start), info.version)
        if steps and steps[-1].starts_at >= step.starts_at:
            steps[-1] = step  # installed before `start` (or at the same instant): only the latest counts
        else:
            steps.append(step)
    return steps


def _period_goals(version: int, definition: Mapping[str, Any]) -> dict[tuple[str, int], GoalRow]:
    """The goal of every service class period of a stored definition: as the service installed it, validated and
    without unset (None) fields, so a class has either its `periods` or one period's `goal` and `importance`, and a
    goal has the fields of its type alone (tests/spark_jobs/workload_activity/test_policy_goals.py holds this to
    the service's compile_policy)."""
    periods_of: dict[str, list[Mapping[str, Any]]] = {SYSOTHER: [{"goal": {"type": "discretionary"}}]}
    for service_class in definition.get("service_classes", ()):
        periods = service_class.get("periods")
        periods_of[service_class["name"]] = [service_class] if periods is None else periods
    return {
        (name, number): GoalRow(
            policy_version=version,
            service_class=name,
            period=number,
            goal_type=period["goal"]["type"],
            goal_ms=period["goal"].get("response_time_ms"),
            goal_percentile=period["goal"].get("percentile"),
            goal_velocity=period["goal"].get("velocity"),
            importance=period.get("importance"),
        )
        for name, periods in periods_of.items()
        for number, period in enumerate(periods, 1)
    }


def goal_rows(versions: Iterable[PolicyVersionInfo]) -> list[GoalRow]:
    """For each version, the goal of every service class period it or an earlier version defines (its own
    definition first, then the latest earlier one). Policies are small: this is a table of a few thousand rows."""
    known: dict[tuple[str, int], GoalRow] = {}
    rows: list[GoalRow] = []
    for info in sorted(versions, key=lambda v: v.version):
        known.update(_period_goals(info.version, info.definition))
        rows.extend(replace(goal, policy_version=info.version) for goal in known.values())
    return rows
