"""Classification: assigning work to a service class and report class by the rules of its subsystem type.

Pure functions, no I/O. Rules follow WLM: within one level the first matching rule wins; a matching rule's
nested rules refine it (again first match wins), and a nested rule inherits the service class and report
class it leaves blank from its parent; work that matches no rule gets the subsystem type's defaults, and a
subsystem type without rules gets SYSOTHER.

The service compiles its checked definition's groups (app/policy/schemas.py), the what-if job a candidate's, read
from its plain data by `groups_of` (after the service checked it): one copy of the rules for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from spark_jobs.contract.goals import SYSOTHER
from spark_jobs.manager.wildcards import wildcard_match

# A qualifier's key among a request's attributes: its abbreviation (the service's Qualifier enum, or plain text).
Q = TypeVar("Q", bound=str)


class Rule(Protocol):
    """A classification rule as a definition gives it (a qualifier such as TN or UI, by its WLM abbreviation)."""

    @property
    def qualifier(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def service_class(self) -> str | None: ...
    @property
    def report_class(self) -> str | None: ...
    @property
    def rules(self) -> Sequence[Rule]: ...


class ClassificationGroup(Protocol):
    @property
    def subsystem_type(self) -> str: ...
    @property
    def default_service_class(self) -> str: ...
    @property
    def default_report_class(self) -> str | None: ...
    @property
    def rules(self) -> Sequence[Rule]: ...


@dataclass(frozen=True, slots=True)
class PlainRule:
    qualifier: str
    value: str
    service_class: str | None
    report_class: str | None
    rules: tuple[PlainRule, ...]


@dataclass(frozen=True, slots=True)
class PlainGroup:
    subsystem_type: str
    default_service_class: str
    default_report_class: str | None
    rules: tuple[PlainRule, ...]


def _plain_rules(rules: Sequence[Mapping[str, Any]]) -> tuple[PlainRule, ...]:
    return tuple(
        PlainRule(
            str(rule["qualifier"]).upper(),
            rule["value"],
            rule.get("service_class"),
            rule.get("report_class"),
            _plain_rules(rule.get("rules") or ()),
        )
        for rule in rules
    )


def groups_of(definition: Mapping[str, Any]) -> dict[str, CompiledGroup]:
    """The compiled classification groups of a checked definition's plain data (as stored or dumped), by subsystem type."""
    groups = (
        PlainGroup(
            group["subsystem_type"],
            group["default_service_class"],
            group.get("default_report_class"),
            _plain_rules(group.get("rules") or ()),
        )
        for group in definition.get("classification") or ()
    )
    return {group.subsystem_type: compile_group(group) for group in groups}


@dataclass(frozen=True, slots=True)
class CompiledRule:
    qualifier: str
    value: str
    # Effective assignment, inheritance from the enclosing rules and the group defaults already applied.
    service_class: str
    report_class: str | None
    children: tuple[CompiledRule, ...]

    @property
    def label(self) -> str:
        return f"{self.qualifier}={self.value}"


@dataclass(frozen=True, slots=True)
class CompiledGroup:
    subsystem_type: str
    default_service_class: str
    default_report_class: str | None
    rules: tuple[CompiledRule, ...]


@dataclass(frozen=True, slots=True)
class Classification:
    service_class: str
    report_class: str | None
    matched_rules: tuple[str, ...] = ()


def compile_group(group: ClassificationGroup) -> CompiledGroup:
    return CompiledGroup(
        subsystem_type=group.subsystem_type,
        default_service_class=group.default_service_class,
        default_report_class=group.default_report_class,
        rules=_compile_rules(group.rules, group.default_service_class, group.default_report_class),
    )


def _compile_rules(rules: Sequence[Rule], service_class: str, report_class: str | None) -> tuple[CompiledRule, ...]:
    compiled = []
    for rule in rules:
        effective_sc = rule.service_class or service_class
        effective_rc = rule.report_class or report_class
        compiled.append(
            CompiledRule(
                qualifier=str(rule.qualifier),
                value=rule.value,
                service_class=effective_sc,
                report_class=effective_rc,
                children=_compile_rules(rule.rules, effective_sc, effective_rc),
            )
        )
    return tuple(compiled)


def classify(groups: Mapping[str, CompiledGroup], subsystem_type: str, attributes: Mapping[Q, str]) -> Classification:
    """Classify work of `subsystem_type` described by `attributes` (a missing attribute is blank)."""
    group = groups.get(subsystem_type.upper())
    if group is None:
        return Classification(SYSOTHER, None)
    path: list[str] = []
    result = Classification(group.default_service_class, group.default_report_class)
    level = group.rules
    # Looked up by a rule's qualifier text: a StrEnum key (the service's Qualifier) hashes and compares as its text.
    by_text = cast(Mapping[str, str], attributes)
    while level:
        rule = _first_match(level, by_text)
        if rule is None:
            break
        path.append(rule.label)
        result = Classification(rule.service_class, rule.report_class, tuple(path))
        level = rule.children
    return result


def _first_match(rules: Sequence[CompiledRule], attributes: Mapping[str, str]) -> CompiledRule | None:
    for rule in rules:
        if wildcard_match(rule.value, attributes.get(rule.qualifier, "")):
            return rule
    return None
