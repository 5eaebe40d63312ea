"""A service definition's plain data (as the service stores or dumps it, after it checked it) as the replay reads it
(pure): each application environment under it, and the class a recorded request would have under it.

What the records hold of a request's classification is its subsystem type, the userid and the queue manager's
subsystem name, not the qualifiers its queue manager classified it by (contract/replay.py REPLAY_QUALIFIERS):
`Classifier` keeps the recorded class where the candidate classifies the request's subsystem type by the same rules
as the version that classified it (the same rules on the same qualifiers give the same class), and classifies it
under the candidate from the recorded qualifiers only where the rules differ."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.contract.goals import SYSOTHER
from spark_jobs.manager.classification import CompiledGroup, classify, groups_of
from spark_jobs.manager.policy import AverageGoal, DiscretionaryGoal, Goal, PercentileGoal, ResourceGroup, ServerLimits, VelocityGoal
from spark_jobs.what_if.model import Environment, Period, ServiceClass

_SYSOTHER_CLASS = ServiceClass(SYSOTHER, (Period(DiscretionaryGoal()),))


def goal_of(goal: Mapping[str, Any]) -> Goal:
    kind = goal["type"]
    if kind == "average":
        return AverageGoal(goal["response_time_ms"])
    if kind == "percentile":
        return PercentileGoal(goal["percentile"], goal["response_time_ms"])
    if kind == "velocity":
        return VelocityGoal(goal["velocity"])
    if kind == "discretionary":
        return DiscretionaryGoal()
    raise ValueError(f"unknown goal type {kind!r}")


def service_class_of(spec: Mapping[str, Any]) -> ServiceClass:
    """A class of the definition: either its `periods`, or one period of its own `importance` and `goal`."""
    periods = spec.get("periods") or [{"importance": spec.get("importance"), "goal": spec["goal"]}]
    return ServiceClass(
        spec["name"],
        tuple(Period(goal_of(period["goal"]), period.get("importance"), period.get("duration_ms")) for period in periods),
        spec.get("resource_group"),
    )


def service_classes(definition: Mapping[str, Any]) -> tuple[ServiceClass, ...]:
    """The definition's classes and SYSOTHER (the class of work no rule classifies)."""
    return (*(service_class_of(spec) for spec in definition.get("service_classes") or ()), _SYSOTHER_CLASS)


def environment_of(definition: Mapping[str, Any], name: str, *, worker_tasks: int = 1) -> Environment:
    """Environment `name` under the definition. One it does not define (a dynamic environment a queue manager
    defined, IWM4AEDF) has the default server limits and its servers started by others."""
    ae = next((spec for spec in definition.get("application_environments") or () if spec["name"] == name), None)
    limits = (ae or {}).get("server_limits") or {}
    return Environment(
        classes=service_classes(definition),
        limits=ServerLimits(limits.get("min", 0), limits.get("max"), limits.get("spread_min", False)),
        resource_groups=tuple(
            ResourceGroup(group["name"], group.get("max_in_flight"), group.get("min_in_flight"))
            for group in definition.get("resource_groups") or ()
        ),
        worker_tasks=worker_tasks,
        starts_servers=bool(ae and ae.get("start_command")),
    )


def defines(definition: Mapping[str, Any], name: str) -> bool:
    return any(spec["name"] == name for spec in definition.get("application_environments") or ())


@dataclass
class Classifier:
    """The class of each recorded request under `candidate`, given the definitions of the versions that classified
    the records (`recorded`, by version)."""

    candidate: Mapping[str, CompiledGroup]
    recorded: Mapping[int, Mapping[str, CompiledGroup]]
    candidate_classes: frozenset[str]
    _same: dict[tuple[str, int | None], bool] = field(default_factory=dict)

    @classmethod
    def of(cls, candidate: Mapping[str, Any], recorded: Mapping[int, Mapping[str, Any]]) -> Classifier:
        names = frozenset(spec.name for spec in service_classes(candidate))
        return cls(groups_of(candidate), {version: groups_of(definition) for version, definition in recorded.items()}, names)

    def same_rules(self, subsystem_type: str, version: int | None) -> bool:
        key = (subsystem_type, version)
        if key not in self._same:
            groups = self.recorded.get(version) if version is not None else None
            self._same[key] = groups is not None and groups.get(subsystem_type) == self.candidate.get(subsystem_type)
        return self._same[key]

    def class_of(
        self, recorded_class: str, subsystem_type: str, version: int | None, qualifiers: Mapping[str, str | None]
    ) -> tuple[str, bool]:
        """The request's class under the candidate, and whether it kept its recorded class (else it was classified
        again from the recorded qualifiers)."""
        if recorded_class in self.candidate_classes and self.same_rules(subsystem_type.upper(), version):
            return recorded_class, True
        attributes = {qualifier: value for qualifier, value in qualifiers.items() if value is not None}
        return classify(self.candidate, subsystem_type, attributes).service_class, False


def latest_classes(definitions: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, ServiceClass]:
    """Every class the definitions define, as the latest of them (by version) defines it, and SYSOTHER: what the
    recorded day's figures are measured against (the nightly report takes the goal of the version active at a
    request's end; the replay's actual side that of the latest definition of its class)."""
    classes: dict[str, ServiceClass] = {}
    for _, definition in sorted(definitions, key=lambda item: item[0]):
        classes.update((spec.name, spec) for spec in service_classes(definition))
    classes.setdefault(SYSOTHER, _SYSOTHER_CLASS)
    return classes
