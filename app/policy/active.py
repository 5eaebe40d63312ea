"""The active policy compiled for fast lookups (pure; built once per installed version)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from app.errors import NotFound
from app.policy.schemas import (
    ApplicationEnvironment,
    AverageGoal,
    DiscretionaryGoal,
    Goal,
    PercentileGoal,
    Qualifier,
    ServiceDefinition,
)
from app.queues.base import AeConfig, GroupCap
from spark_jobs.contract.goals import RESPONSE_BUCKET_LIMITS_PCT
from spark_jobs.manager.classification import (
    SYSOTHER,
    Classification,
    CompiledGroup,
    classify,
    compile_group,
)
from spark_jobs.manager.select_order import class_order, importance_rank

# A policy that names no nodes has this one implicit node.
DEFAULT_NODE = "LOCAL"


@dataclass(frozen=True, slots=True)
class ServicePeriod:
    number: int  # 1-based, as WLM numbers periods
    duration_ms: int | None
    importance: int | None
    goal: Goal


@dataclass(frozen=True, slots=True)
class ServiceClassSpec:
    name: str
    description: str
    periods: tuple[ServicePeriod, ...]


_SYSOTHER = ServiceClassSpec(SYSOTHER, "work no rule classifies", (ServicePeriod(1, None, None, DiscretionaryGoal(type="discretionary")),))


@dataclass(frozen=True, slots=True)
class DynamicOwner:
    """The queue manager connection a dynamic application environment (IWM4AEDF) belongs to."""

    queue_manager_id: int
    subsystem_name: str


@dataclass(frozen=True, slots=True)
class ActivePolicy:
    version: int
    definition: ServiceDefinition
    service_classes: Mapping[str, ServiceClassSpec]
    classification: Mapping[str, CompiledGroup]
    application_environments: Mapping[str, ApplicationEnvironment]
    nodes: tuple[str, ...]
    # Service classes most important first (importance of the first period; discretionary last), SYSOTHER last:
    # the order in which select looks at an environment's queues.
    class_order: tuple[str, ...]
    # Environments queue managers defined for themselves, in `application_environments` too; not in `definition`.
    dynamic: Mapping[str, DynamicOwner] = field(default_factory=lambda: MappingProxyType({}))
    resource_groups: Mapping[str, GroupCap] = field(default_factory=lambda: MappingProxyType({}))
    # Per class of `class_order`: its importance rank, and its resource group (None: none).
    class_ranks: tuple[int, ...] = ()
    class_groups: tuple[GroupCap | None, ...] = ()

    def classify(self, subsystem_type: str, attributes: Mapping[Qualifier, str]) -> Classification:
        return classify(self.classification, subsystem_type, attributes)

    def queue_config(self, application_environment: str) -> AeConfig | None:
        """What the queue scripts need to know of an environment's definition; None when the policy has no such environment."""
        ae = self.application_environments.get(application_environment)
        if ae is None:
            return None
        return AeConfig(self.class_order, ae.completion_time_ms, ae.backlog_limit, ae.max_deliveries, self.class_ranks, self.class_groups)

    def environment(self, name: str) -> ApplicationEnvironment:
        """The environment `name` (404 `unknown_application_environment` when the policy has none of that name)."""
        ae = self.application_environments.get(name)
        if ae is None:
            known = ", ".join(self.application_environments) or "none"
            raise NotFound(
                f"unknown application environment {name!r}; defined: {known}",
                code="unknown_application_environment",
                application_environment=name,
            )
        return ae

    def hosts(self, application_environment: str, node: str) -> bool:
        ae = self.application_environments.get(application_environment)
        if ae is None or node not in self.nodes:
            return False
        return ae.nodes is None or node in ae.nodes


def bucket_bounds_ms(goal: Goal) -> tuple[float, ...]:
    """The upper bounds of a goal's 14 report buckets but the last (ms): its response time times each limit; none for
    a goal without a response time."""
    response_time_ms = _response_time_ms(goal)
    if response_time_ms is None:
        return ()
    return tuple(response_time_ms * limit / 100 for limit in RESPONSE_BUCKET_LIMITS_PCT)


def period_bounds_ms(policy: ActivePolicy) -> dict[str, list[tuple[float, ...]]]:
    """Per service class, per period, its report buckets' upper bounds (ms; none without a response time goal)."""
    return {name: [bucket_bounds_ms(period.goal) for period in spec.periods] for name, spec in policy.service_classes.items()}


def bucket_specs(policy: ActivePolicy) -> dict[str, str]:
    """Per service class, what the end scripts bucket its requests by (lua/includes/end_held.lua `histograms`): per period,
    `<duration ms or ''>|<goal's response time ms or ''>`, separated by `;`."""
    return {
        name: ";".join(f"{_text(period.duration_ms)}|{_text(_response_time_ms(period.goal))}" for period in spec.periods)
        for name, spec in policy.service_classes.items()
    }


def _response_time_ms(goal: Goal) -> int | None:
    return goal.response_time_ms if isinstance(goal, AverageGoal | PercentileGoal) else None


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def with_dynamic(policy: ActivePolicy, environments: Iterable[tuple[ApplicationEnvironment, DynamicOwner]]) -> ActivePolicy:
    """The service definition's policy with the dynamic environments of connected queue managers added."""
    dynamic = {ae.name: (ae, owner) for ae, owner in environments if ae.name not in policy.application_environments}
    if not dynamic:
        return policy
    return replace(
        policy,
        application_environments=MappingProxyType(dict(policy.application_environments) | {name: ae for name, (ae, _) in dynamic.items()}),
        dynamic=MappingProxyType({name: owner for name, (_, owner) in dynamic.items()}),
    )


def _importance_rank(service_class: ServiceClassSpec) -> int:
    first = service_class.periods[0]
    return importance_rank(first.importance, first.goal.type == "discretionary")


def compile_policy(version: int, definition: ServiceDefinition) -> ActivePolicy:
    """Compile a definition that `validate_definition` accepted."""
    classes = {SYSOTHER: _SYSOTHER}
    for sc in definition.service_classes:
        periods: tuple[ServicePeriod, ...]
        if sc.periods is None:
            assert sc.goal is not None  # validate_definition refuses a class with neither periods nor a goal
            periods = (ServicePeriod(1, None, sc.importance, sc.goal),)
        else:
            periods = tuple(ServicePeriod(n, p.duration_ms, p.importance, p.goal) for n, p in enumerate(sc.periods, 1))
        classes[sc.name] = ServiceClassSpec(sc.name, sc.description, periods)
    order = class_order({name: _importance_rank(spec) for name, spec in classes.items()})
    groups = {g.name: GroupCap(g.name, g.max_in_flight, g.min_in_flight) for g in definition.resource_groups}
    group_of = {sc.name: groups[sc.resource_group] for sc in definition.service_classes if sc.resource_group is not None}
    return ActivePolicy(
        version=version,
        class_order=order,
        resource_groups=MappingProxyType(groups),
        class_ranks=tuple(_importance_rank(classes[name]) for name in order),
        class_groups=tuple(group_of.get(name) for name in order) if group_of else (),
        definition=definition,
        service_classes=MappingProxyType(classes),
        classification=MappingProxyType({g.subsystem_type: compile_group(g) for g in definition.classification}),
        application_environments=MappingProxyType({ae.name: ae for ae in definition.application_environments}),
        nodes=tuple(node.name for node in definition.nodes) or (DEFAULT_NODE,),
    )
