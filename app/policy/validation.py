"""Cross-field and reference checks of a service definition. Pure: a definition in, a list of problems out,
each with the path of the offending field, so one install reports every mistake at once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.policy.active import DEFAULT_NODE
from app.policy.schemas import (
    MAX_PERIODS,
    MAX_RULE_DEPTH,
    EnvironmentSettings,
    Period,
    Rule,
    ServiceClass,
    ServiceDefinition,
)
from spark_jobs.contract.goals import SYSOTHER

Problem = dict[str, str]


def _problem(path: str, message: str) -> Problem:
    return {"path": path, "message": message}


def validate_definition(definition: ServiceDefinition, longest_completion_ms: int | None = None) -> list[Problem]:
    """`longest_completion_ms`: the longest completion time the service's tombstones cover (None: any)."""
    problems: list[Problem] = []
    problems += _duplicates("service_classes", (sc.name for sc in definition.service_classes))
    problems += _duplicates("report_classes", (rc.name for rc in definition.report_classes))
    problems += _duplicates("resource_groups", (group.name for group in definition.resource_groups))
    problems += _duplicates("classification", (g.subsystem_type for g in definition.classification), "subsystem_type")
    problems += _duplicates("application_environments", (ae.name for ae in definition.application_environments))
    problems += _duplicates("nodes", (node.name for node in definition.nodes))
    for i, node in enumerate(definition.nodes):
        problems += _duplicates(f"nodes[{i}].links", (link.name for link in node.links or ()))

    resource_groups = {group.name for group in definition.resource_groups}
    for i, group in enumerate(definition.resource_groups):
        if group.min_in_flight is not None and group.max_in_flight is not None and group.min_in_flight > group.max_in_flight:
            problems.append(
                _problem(f"resource_groups[{i}].min_in_flight", f"{group.min_in_flight} is above max_in_flight {group.max_in_flight}")
            )
    for i, service_class in enumerate(definition.service_classes):
        problems += _service_class_problems(f"service_classes[{i}]", service_class)
        problems += _reference(f"service_classes[{i}].resource_group", service_class.resource_group, resource_groups, "resource group")

    service_classes = {sc.name for sc in definition.service_classes} | {SYSOTHER}
    report_classes = {rc.name for rc in definition.report_classes}
    for i, classification in enumerate(definition.classification):
        path = f"classification[{i}]"
        problems += _reference(f"{path}.default_service_class", classification.default_service_class, service_classes, "service class")
        problems += _reference(f"{path}.default_report_class", classification.default_report_class, report_classes, "report class")
        problems += _rule_problems(f"{path}.rules", classification.rules, service_classes, report_classes, depth=1)

    nodes = {node.name for node in definition.nodes}
    for i, ae in enumerate(definition.application_environments):
        problems += environment_problems(f"application_environments[{i}].", ae, nodes, longest_completion_ms)
    return problems


def environment_problems(path: str, ae: EnvironmentSettings, nodes: set[str], longest_completion_ms: int | None = None) -> list[Problem]:
    """An environment's own rules (`path` prefixes the fields, '' for a request body that is the environment)."""
    problems = []
    if longest_completion_ms is not None and ae.completion_time_ms > longest_completion_ms:
        problems.append(_problem(f"{path}completion_time_ms", completion_time_refusal(ae.completion_time_ms, longest_completion_ms)))
    limits = ae.server_limits
    if limits.max is not None and limits.min > limits.max:
        problems.append(_problem(f"{path}server_limits.min", f"min ({limits.min}) exceeds max ({limits.max})"))
    for j, node in enumerate(ae.nodes or ()):
        if node not in nodes:
            problems.append(_problem(f"{path}nodes[{j}]", f"unknown node {node!r}; nodes: {_listing(nodes)}"))
    if ae.nodes is not None:
        problems += _duplicates(f"{path}nodes", ae.nodes, attribute=None)
    hosting = set(ae.nodes) & nodes if ae.nodes is not None else nodes or {DEFAULT_NODE}
    for node in ae.instances:
        if node not in hosting:
            problems.append(_problem(f"{path}instances.{node}", f"node {node!r} does not host {ae.name}; hosting: {_listing(hosting)}"))
    return problems


def completion_time_refusal(completion_time_ms: int, longest_completion_ms: int) -> str:
    return (
        f"{completion_time_ms} ms is longer than the {longest_completion_ms} ms the service keeps tombstones for (a late end "
        "could find none): raise WLM_TOMBSTONE_SECONDS to at least this completion time plus the heartbeat timeout "
        "plus WLM_TOMBSTONE_MARGIN_SECONDS, or shorten it"
    )


def _service_class_problems(path: str, service_class: ServiceClass) -> list[Problem]:
    if service_class.name == SYSOTHER:
        return [_problem(f"{path}.name", f"{SYSOTHER} is reserved for work that no rule classifies")]
    direct = service_class.goal is not None or service_class.importance is not None
    if service_class.periods is not None:
        if direct:
            return [_problem(f"{path}.periods", "give either importance and goal, or periods, not both")]
        return _period_problems(f"{path}.periods", service_class.periods)
    if service_class.goal is None:
        return [_problem(f"{path}.goal", "a service class needs a goal (or a list of periods)")]
    return _period_problems(path, [Period(importance=service_class.importance, goal=service_class.goal)], single=True)


def _period_problems(path: str, periods: Sequence[Period], single: bool = False) -> list[Problem]:
    if not periods:
        return [_problem(path, "at least one period is required")]
    if len(periods) > MAX_PERIODS:
        return [_problem(path, f"at most {MAX_PERIODS} periods")]
    problems = []
    last = len(periods) - 1
    for n, period in enumerate(periods):
        at = path if single else f"{path}[{n}]"
        discretionary = period.goal.type == "discretionary"
        if not discretionary and period.importance is None:
            problems.append(_problem(f"{at}.importance", f"a {period.goal.type} goal needs an importance (1-5)"))
        if discretionary and n != last:
            problems.append(_problem(f"{at}.goal", "only the last period may have a discretionary goal"))
        if n != last and period.duration_ms is None:
            problems.append(_problem(f"{at}.duration_ms", "every period but the last needs a duration"))
        if n == last and period.duration_ms is not None:
            problems.append(_problem(f"{at}.duration_ms", "the last period has no duration"))
    return problems


def _rule_problems(path: str, rules: Sequence[Rule], service_classes: set[str], report_classes: set[str], depth: int) -> list[Problem]:
    problems: list[Problem] = []
    if rules and depth > MAX_RULE_DEPTH:
        return [_problem(path, f"rules nest at most {MAX_RULE_DEPTH} levels deep")]
    for i, rule in enumerate(rules):
        at = f"{path}[{i}]"
        problems += _reference(f"{at}.service_class", rule.service_class, service_classes, "service class")
        problems += _reference(f"{at}.report_class", rule.report_class, report_classes, "report class")
        problems += _rule_problems(f"{at}.rules", rule.rules, service_classes, report_classes, depth + 1)
    return problems


def _reference(path: str, name: str | None, known: set[str], kind: str) -> list[Problem]:
    if name is None or name in known:
        return []
    return [_problem(path, f"unknown {kind} {name!r}; defined: {_listing(known)}")]


def _duplicates(path: str, names: Iterable[str], attribute: str | None = "name") -> list[Problem]:
    seen: set[str] = set()
    problems = []
    for i, name in enumerate(names):
        if name in seen:
            at = f"{path}[{i}]" + (f".{attribute}" if attribute else "")
            problems.append(_problem(at, f"duplicate {name!r}"))
        seen.add(name)
    return problems


def _listing(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
