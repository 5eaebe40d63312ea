"""Checking a service definition: shape and types (pydantic, via parse_definition) and cross-field rules and references
(validate_definition). Table-driven: each case mutates a minimal valid document and names the paths it expects."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.errors import ValidationFailed
from app.policy.active import compile_policy
from app.policy.schemas import ServiceDefinition
from app.policy.service import parse_definition
from app.policy.validation import validate_definition
from app.queues.base import GroupCap

EXAMPLE_POLICY_PATH = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"

Doc = dict[str, Any]


def minimal() -> Doc:
    """A small valid document that every case starts from."""
    return {
        "name": "TEST",
        "service_classes": [
            {"name": "ONLINE", "importance": 1, "goal": {"type": "percentile", "percentile": 90, "response_time_ms": 250}},
            {
                "name": "BATCH",
                "periods": [
                    {"duration_ms": 5000, "importance": 3, "goal": {"type": "average", "response_time_ms": 2000}},
                    {"importance": 5, "goal": {"type": "discretionary"}},
                ],
            },
        ],
        "report_classes": ["RC1"],
        "classification": [
            {
                "subsystem_type": "CB",
                "default_service_class": "BATCH",
                "rules": [
                    {
                        "qualifier": "UI",
                        "value": "ATM*",
                        "service_class": "ONLINE",
                        "report_class": "RC1",
                        "rules": [
                            {"qualifier": "TN", "value": "CASH"},
                            {"qualifier": "TN", "value": "LOAN", "service_class": "BATCH"},
                        ],
                    }
                ],
            }
        ],
        "application_environments": [{"name": "PAYROLL", "subsystem_type": "CB", "nodes": ["NODE1"]}],
        "nodes": [{"name": "NODE1"}, {"name": "NODE2"}],
    }


def mutate(fn: Callable[[Doc], None]) -> Doc:
    doc = minimal()
    fn(doc)
    return doc


def sc(doc: Doc, i: int = 0) -> Doc:
    return doc["service_classes"][i]


def rules(doc: Doc) -> list[Doc]:
    return doc["classification"][0]["rules"]


def errors_of(doc: Doc) -> list[dict[str, str]]:
    with pytest.raises(ValidationFailed) as info:
        parse_definition(copy.deepcopy(doc))
    errors = info.value.details["errors"]
    assert errors, "ValidationFailed without errors"
    for error in errors:
        assert set(error) == {"path", "message"}
        assert error["message"]
    return errors


def paths_of(doc: Doc) -> list[str]:
    return [e["path"] for e in errors_of(doc)]


def _set(doc: Doc, key: str, value: Any) -> None:
    doc[key] = value


def _pop(container: Doc, key: str) -> None:
    del container[key]


def _append_sc(doc: Doc, item: Doc) -> None:
    doc["service_classes"].append(item)


# --------------------------------------------------------------------------------------------------------------------
# The valid starting points
# --------------------------------------------------------------------------------------------------------------------


def test_minimal_document_is_valid() -> None:
    definition = parse_definition(minimal())
    assert isinstance(definition, ServiceDefinition)
    assert validate_definition(definition) == []


def test_example_policy_is_valid() -> None:
    data = yaml.safe_load(EXAMPLE_POLICY_PATH.read_text())
    definition = ServiceDefinition.model_validate(data)
    assert validate_definition(definition) == []
    assert parse_definition(data).name == "PRODPLEX"


# --------------------------------------------------------------------------------------------------------------------
# One problem each: (id, mutation, expected paths in order)
# --------------------------------------------------------------------------------------------------------------------

Case = tuple[str, Callable[[Doc], None], list[str]]

SINGLE_PROBLEM_CASES: list[Case] = [
    # ---- ranges and types (pydantic)
    ("importance-6", lambda d: sc(d).update(importance=6), ["service_classes[0].importance"]),
    ("importance-0", lambda d: sc(d).update(importance=0), ["service_classes[0].importance"]),
    ("importance-not-int", lambda d: sc(d).update(importance="high"), ["service_classes[0].importance"]),
    (
        "period-importance-6",
        lambda d: sc(d, 1)["periods"][0].update(importance=6),
        ["service_classes[1].periods[0].importance"],
    ),
    (
        "response-time-negative",
        lambda d: sc(d)["goal"].update(response_time_ms=-5),
        ["service_classes[0].goal.response_time_ms"],
    ),
    (
        "response-time-zero-average-in-period",
        lambda d: sc(d, 1)["periods"][0]["goal"].update(response_time_ms=0),
        ["service_classes[1].periods[0].goal.response_time_ms"],
    ),
    (
        "response-time-over-a-day",
        lambda d: sc(d)["goal"].update(response_time_ms=86_400_001),
        ["service_classes[0].goal.response_time_ms"],
    ),
    ("goal-type-unknown", lambda d: sc(d)["goal"].update(type="fastest"), ["service_classes[0].goal.type"]),
    ("goal-type-missing", lambda d: sc(d)["goal"].pop("type"), ["service_classes[0].goal.type"]),
    ("goal-not-object", lambda d: sc(d).update(goal="fast"), ["service_classes[0].goal"]),
    ("percentile-100", lambda d: sc(d)["goal"].update(percentile=100), ["service_classes[0].goal.percentile"]),
    ("percentile-0", lambda d: sc(d)["goal"].update(percentile=0), ["service_classes[0].goal.percentile"]),
    ("percentile-missing", lambda d: sc(d)["goal"].pop("percentile"), ["service_classes[0].goal.percentile"]),
    (
        "velocity-100",
        lambda d: sc(d).update(goal={"type": "velocity", "velocity": 100}),
        ["service_classes[0].goal.velocity"],
    ),
    (
        "average-missing-response-time",
        lambda d: sc(d).update(goal={"type": "average"}),
        ["service_classes[0].goal.response_time_ms"],
    ),
    (
        "goal-field-for-other-type",
        lambda d: sc(d).update(goal={"type": "discretionary", "percentile": 90}),
        ["service_classes[0].goal.percentile"],
    ),
    ("unknown-field-service-class", lambda d: sc(d).update(importnce=1), ["service_classes[0].importnce"]),
    ("unknown-field-top-level", lambda d: _set(d, "servce_classes", []), ["servce_classes"]),
    ("unknown-field-goal", lambda d: sc(d)["goal"].update(respone_time_ms=1), ["service_classes[0].goal.respone_time_ms"]),
    (
        "unknown-field-nested-rule",
        lambda d: rules(d)[0]["rules"][1].update(servce_class="ONLINE"),
        ["classification[0].rules[0].rules[1].servce_class"],
    ),
    (
        "unknown-field-server-limits",
        lambda d: d["application_environments"][0].update(server_limits={"maximum": 3}),
        ["application_environments[0].server_limits.maximum"],
    ),
    ("unknown-qualifier", lambda d: rules(d)[0].update(qualifier="XX"), ["classification[0].rules[0].qualifier"]),
    ("empty-rule-value", lambda d: rules(d)[0].update(value=""), ["classification[0].rules[0].value"]),
    ("name-bad-characters", lambda d: sc(d).update(name="ON LINE"), ["service_classes[0].name"]),
    ("name-too-long", lambda d: sc(d).update(name="X" * 33), ["service_classes[0].name"]),
    ("subsystem-type-too-long", lambda d: d["classification"][0].update(subsystem_type="ABCDEFGHI"), ["classification[0].subsystem_type"]),
    ("no-service-classes", lambda d: _set(d, "service_classes", []), ["service_classes"]),
    ("missing-name", lambda d: _pop(d, "name"), ["name"]),
    (
        "server-limits-max-0",
        lambda d: d["application_environments"][0].update(server_limits={"max": 0}),
        ["application_environments[0].server_limits.max"],
    ),
    # ---- service class shape (validate_definition)
    ("period-without-goal", lambda d: sc(d, 1)["periods"][0].pop("goal"), ["service_classes[1].periods[0].goal"]),
    (
        "neither-goal-nor-periods",
        lambda d: _append_sc(d, {"name": "EMPTY"}),
        ["service_classes[2].goal"],
    ),
    (
        "importance-without-goal",
        lambda d: _append_sc(d, {"name": "EMPTY", "importance": 2}),
        ["service_classes[2].goal"],
    ),
    (
        "both-goal-and-periods",
        lambda d: sc(d, 1).update(goal={"type": "velocity", "velocity": 50}),
        ["service_classes[1].periods"],
    ),
    ("both-importance-and-periods", lambda d: sc(d, 1).update(importance=2), ["service_classes[1].periods"]),
    ("empty-periods", lambda d: sc(d, 1).update(periods=[]), ["service_classes[1].periods"]),
    (
        "more-than-eight-periods",
        lambda d: sc(d, 1).update(
            periods=[{"duration_ms": 10, "importance": 2, "goal": {"type": "velocity", "velocity": 10}}] * 8
            + [{"goal": {"type": "discretionary"}}]
        ),
        ["service_classes[1].periods"],
    ),
    (
        "discretionary-not-last",
        lambda d: sc(d, 1)["periods"].insert(0, {"duration_ms": 100, "goal": {"type": "discretionary"}}),
        ["service_classes[1].periods[0].goal"],
    ),
    (
        "non-last-period-without-duration",
        lambda d: sc(d, 1)["periods"][0].pop("duration_ms"),
        ["service_classes[1].periods[0].duration_ms"],
    ),
    (
        "last-period-with-duration",
        lambda d: sc(d, 1)["periods"][1].update(duration_ms=1000),
        ["service_classes[1].periods[1].duration_ms"],
    ),
    (
        "single-period-last-with-duration",
        lambda d: sc(d, 1).update(periods=[{"duration_ms": 10, "importance": 1, "goal": {"type": "velocity", "velocity": 10}}]),
        ["service_classes[1].periods[0].duration_ms"],
    ),
    (
        "period-without-importance",
        lambda d: sc(d, 1)["periods"][0].pop("importance"),
        ["service_classes[1].periods[0].importance"],
    ),
    ("single-period-without-importance", lambda d: sc(d).pop("importance"), ["service_classes[0].importance"]),
    (
        "sysother-as-class-name",
        lambda d: _append_sc(d, {"name": "SYSOTHER", "goal": {"type": "discretionary"}}),
        ["service_classes[2].name"],
    ),
    (
        "sysother-lowercase-as-class-name",
        lambda d: _append_sc(d, {"name": "sysother", "goal": {"type": "discretionary"}}),
        ["service_classes[2].name"],
    ),
    # ---- duplicates (names are upper-cased, so case does not tell them apart)
    (
        "duplicate-service-class-case-insensitive",
        lambda d: _append_sc(d, {"name": "online", "importance": 2, "goal": {"type": "velocity", "velocity": 20}}),
        ["service_classes[2].name"],
    ),
    ("duplicate-report-class", lambda d: d["report_classes"].append("rc1"), ["report_classes[1].name"]),
    (
        "duplicate-application-environment",
        lambda d: d["application_environments"].append({"name": "payroll", "subsystem_type": "STC"}),
        ["application_environments[1].name"],
    ),
    (
        "duplicate-subsystem-type",
        lambda d: d["classification"].append({"subsystem_type": "cb", "default_service_class": "ONLINE"}),
        ["classification[1].subsystem_type"],
    ),
    ("duplicate-node", lambda d: d["nodes"].append({"name": "node2"}), ["nodes[2].name"]),
    (
        "duplicate-node-in-ae",
        lambda d: d["application_environments"][0].update(nodes=["NODE1", "NODE2", "node1"]),
        ["application_environments[0].nodes[2]"],
    ),
    # ---- references
    (
        "rule-unknown-service-class",
        lambda d: rules(d)[0].update(service_class="NOPE"),
        ["classification[0].rules[0].service_class"],
    ),
    (
        "nested-rule-unknown-service-class",
        lambda d: rules(d)[0]["rules"][1].update(service_class="NOPE"),
        ["classification[0].rules[0].rules[1].service_class"],
    ),
    (
        "deeply-nested-rule-unknown-service-class",
        lambda d: rules(d)[0]["rules"][0].update(rules=[{"qualifier": "TC", "value": "X", "service_class": "NOPE"}]),
        ["classification[0].rules[0].rules[0].rules[0].service_class"],
    ),
    (
        "rule-unknown-report-class",
        lambda d: rules(d)[0].update(report_class="NOPE"),
        ["classification[0].rules[0].report_class"],
    ),
    (
        "nested-rule-unknown-report-class",
        lambda d: rules(d)[0]["rules"][0].update(report_class="NOPE"),
        ["classification[0].rules[0].rules[0].report_class"],
    ),
    (
        "unknown-default-service-class",
        lambda d: d["classification"][0].update(default_service_class="NOPE"),
        ["classification[0].default_service_class"],
    ),
    (
        "unknown-default-report-class",
        lambda d: d["classification"][0].update(default_report_class="NOPE"),
        ["classification[0].default_report_class"],
    ),
    (
        "service-class-used-as-report-class",
        lambda d: rules(d)[0].update(report_class="ONLINE"),
        ["classification[0].rules[0].report_class"],
    ),
    (
        "sysother-as-report-class",
        lambda d: rules(d)[0].update(report_class="SYSOTHER"),
        ["classification[0].rules[0].report_class"],
    ),
    (
        "ae-unknown-node",
        lambda d: d["application_environments"][0].update(nodes=["NODE1", "NODE9"]),
        ["application_environments[0].nodes[1]"],
    ),
    (
        "ae-node-when-no-nodes-defined",
        lambda d: (_pop(d, "nodes"), d["application_environments"][0].update(nodes=["NODE1"])),
        ["application_environments[0].nodes[0]"],
    ),
    (
        "server-limits-min-over-max",
        lambda d: d["application_environments"][0].update(server_limits={"min": 5, "max": 2}),
        ["application_environments[0].server_limits.min"],
    ),
]


@pytest.mark.parametrize(("mutation", "expected"), [pytest.param(m, e, id=i) for i, m, e in SINGLE_PROBLEM_CASES])
def test_invalid_definition(mutation: Callable[[Doc], None], expected: list[str]) -> None:
    assert paths_of(mutate(mutation)) == expected


def test_single_problem_case_ids_are_unique() -> None:
    ids = [case[0] for case in SINGLE_PROBLEM_CASES]
    assert len(ids) == len(set(ids))


# --------------------------------------------------------------------------------------------------------------------
# Valid variations: none of these is a problem
# --------------------------------------------------------------------------------------------------------------------

VALID_CASES: list[tuple[str, Callable[[Doc], None]]] = [
    ("rule-assigns-sysother", lambda d: rules(d)[0].update(service_class="SYSOTHER")),
    ("default-service-class-sysother", lambda d: d["classification"][0].update(default_service_class="SYSOTHER")),
    ("lowercase-references", lambda d: rules(d)[0].update(service_class="online", report_class="rc1")),
    ("lowercase-qualifier", lambda d: rules(d)[0].update(qualifier="ui")),
    ("discretionary-single-period-without-importance", lambda d: _append_sc(d, {"name": "IDLE", "goal": {"type": "discretionary"}})),
    ("discretionary-last-period-without-importance", lambda d: sc(d, 1)["periods"][1].pop("importance")),
    ("ae-without-nodes", lambda d: d["application_environments"][0].pop("nodes")),
    ("no-nodes-no-ae-nodes", lambda d: (_pop(d, "nodes"), d["application_environments"][0].pop("nodes"))),
    ("server-limits-min-equals-max", lambda d: d["application_environments"][0].update(server_limits={"min": 3, "max": 3})),
    ("server-limits-min-without-max", lambda d: d["application_environments"][0].update(server_limits={"min": 50})),
    ("report-class-as-object", lambda d: _set(d, "report_classes", [{"name": "RC1", "description": "x"}])),
    ("no-classification", lambda d: _pop(d, "classification")),
    ("percentile-99", lambda d: sc(d)["goal"].update(percentile=99)),
    ("percentile-1", lambda d: sc(d)["goal"].update(percentile=1)),
    ("response-time-one-day", lambda d: sc(d)["goal"].update(response_time_ms=86_400_000)),
    (
        "eight-periods",
        lambda d: sc(d, 1).update(
            periods=[{"duration_ms": 10, "importance": 2, "goal": {"type": "velocity", "velocity": 10}}] * 7
            + [{"goal": {"type": "discretionary"}}]
        ),
    ),
    ("start-command-string", lambda d: d["application_environments"][0].update(start_command="python -m x 'a b'")),
]


@pytest.mark.parametrize("mutation", [pytest.param(m, id=i) for i, m in VALID_CASES])
def test_valid_variation(mutation: Callable[[Doc], None]) -> None:
    definition = parse_definition(mutate(mutation))
    assert validate_definition(definition) == []


def test_names_and_references_are_upper_cased() -> None:
    definition = parse_definition(mutate(lambda d: rules(d)[0].update(service_class="online", report_class="rc1")))
    rule = definition.classification[0].rules[0]
    assert (rule.service_class, rule.report_class) == ("ONLINE", "RC1")


def test_start_command_string_is_split_like_a_shell() -> None:
    definition = parse_definition(mutate(lambda d: d["application_environments"][0].update(start_command="python -m x 'a b'")))
    assert definition.application_environments[0].start_command == ["python", "-m", "x", "a b"]


# --------------------------------------------------------------------------------------------------------------------
# Union tags are not part of paths
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        pytest.param(
            {"type": "percentile", "percentile": 90, "response_time_ms": -5}, "service_classes[0].goal.response_time_ms", id="percentile"
        ),
        pytest.param({"type": "average", "response_time_ms": "slow"}, "service_classes[0].goal.response_time_ms", id="average"),
        pytest.param({"type": "velocity", "velocity": "x"}, "service_classes[0].goal.velocity", id="velocity"),
        pytest.param({"type": "discretionary", "extra": 1}, "service_classes[0].goal.extra", id="discretionary"),
    ],
)
def test_union_tag_not_in_path(goal: Doc, expected: str) -> None:
    paths = paths_of(mutate(lambda d: sc(d).update(goal=goal)))
    assert paths == [expected]


# User-written values that happen to equal a field name or a goal type must not be mistaken for union tags.
@pytest.mark.parametrize(
    ("mutation", "expected"),
    [
        pytest.param(
            lambda d: sc(d).update(description="goal", goal={"type": "average", "response_time_ms": -5}),
            "service_classes[0].goal.response_time_ms",
            id="description-equals-field-name",
        ),
        pytest.param(
            lambda d: sc(d).update(description="percentile", goal={"type": "percentile", "percentile": 100, "response_time_ms": 1}),
            "service_classes[0].goal.percentile",
            id="description-equals-goal-type",
        ),
        pytest.param(
            lambda d: rules(d)[0].update(value="rules", rules=[{"qualifier": "XX", "value": "A"}]),
            "classification[0].rules[0].rules[0].qualifier",
            id="rule-value-equals-field-name",
        ),
        pytest.param(
            lambda d: d["application_environments"][0].update(description="server_limits", server_limits={"max": 0}),
            "application_environments[0].server_limits.max",
            id="ae-description-equals-field-name",
        ),
    ],
)
def test_user_values_equal_to_field_names_do_not_change_paths(mutation: Callable[[Doc], None], expected: str) -> None:
    assert paths_of(mutate(mutation)) == [expected]


def test_union_tag_not_in_period_goal_path() -> None:
    paths = paths_of(mutate(lambda d: sc(d, 1)["periods"][0]["goal"].update(response_time_ms=-1)))
    assert paths == ["service_classes[1].periods[0].goal.response_time_ms"]
    assert "average" not in paths[0]


# --------------------------------------------------------------------------------------------------------------------
# Every problem at once
# --------------------------------------------------------------------------------------------------------------------


def test_several_reference_and_shape_problems_reported_at_once() -> None:
    def many(d: Doc) -> None:
        _append_sc(d, {"name": "online", "importance": 2, "goal": {"type": "velocity", "velocity": 20}})  # duplicate
        _append_sc(d, {"name": "EMPTY"})  # neither goal nor periods
        sc(d, 1)["periods"][1]["duration_ms"] = 10  # last period with duration
        d["report_classes"].append("RC1")  # duplicate report class
        rules(d)[0]["service_class"] = "NOPE"  # unknown service class
        rules(d)[0]["rules"][1]["report_class"] = "NOPE"  # nested unknown report class
        d["classification"][0]["default_report_class"] = "NOPE"
        d["application_environments"][0]["nodes"] = ["NODE9"]
        d["application_environments"][0]["server_limits"] = {"min": 9, "max": 1}

    errors = errors_of(mutate(many))
    assert sorted(e["path"] for e in errors) == sorted(
        [
            "service_classes[2].name",
            "service_classes[3].goal",
            "service_classes[1].periods[1].duration_ms",
            "report_classes[1].name",
            "classification[0].rules[0].service_class",
            "classification[0].rules[0].rules[1].report_class",
            "classification[0].default_report_class",
            "application_environments[0].nodes[0]",
            "application_environments[0].server_limits.min",
        ]
    )


def test_several_type_problems_reported_at_once() -> None:
    def many(d: Doc) -> None:
        sc(d)["importance"] = "high"
        sc(d)["goal"]["response_time_ms"] = -5
        sc(d, 1)["periods"][0]["goal"] = {"type": "fastest"}
        rules(d)[0]["rules"][1]["qualifier"] = "XX"
        d["application_environments"][0]["backlg_limit"] = 1

    errors = errors_of(mutate(many))
    assert sorted(e["path"] for e in errors) == sorted(
        [
            "service_classes[0].importance",
            "service_classes[0].goal.response_time_ms",
            "service_classes[1].periods[0].goal.type",
            "classification[0].rules[0].rules[1].qualifier",
            "application_environments[0].backlg_limit",
        ]
    )


def test_validation_failed_message_summarises() -> None:
    def two(d: Doc) -> None:
        rules(d)[0]["service_class"] = "NOPE"
        d["classification"][0]["default_service_class"] = "NOPE2"

    with pytest.raises(ValidationFailed) as info:
        parse_definition(mutate(two))
    exc = info.value
    assert exc.status == 422
    assert exc.code == "validation_failed"
    first = exc.details["errors"][0]
    assert exc.message == f"{first['path']}: {first['message']} (and 1 more)"


def test_messages_name_the_problem() -> None:
    errors = errors_of(mutate(lambda d: rules(d)[0].update(service_class="NOPE")))
    assert "NOPE" in errors[0]["message"]
    assert "ONLINE" in errors[0]["message"]  # lists the defined classes
    errors = errors_of(mutate(lambda d: d["application_environments"][0].update(server_limits={"min": 5, "max": 2})))
    assert "5" in errors[0]["message"] and "2" in errors[0]["message"]


# --------------------------------------------------------------------------------------------------------------------
# validate_definition directly (a definition that passed pydantic)
# --------------------------------------------------------------------------------------------------------------------


def test_validate_definition_returns_problems_without_raising() -> None:
    definition = ServiceDefinition.model_validate(
        mutate(lambda d: (sc(d).update(importance=None), rules(d)[0].update(service_class="NOPE")))
    )
    problems = validate_definition(definition)
    assert [p["path"] for p in problems] == ["service_classes[0].importance", "classification[0].rules[0].service_class"]
    assert all(set(p) == {"path", "message"} for p in problems)


def test_rules_nested_too_deep() -> None:
    leaf: Doc = {"qualifier": "TN", "value": "X"}
    for _ in range(15):
        leaf = {"qualifier": "TN", "value": "X", "rules": [leaf]}
    # 16 levels deep: the 16th level is reported once, at its list.
    paths = paths_of(mutate(lambda d: d["classification"][0].update(rules=[leaf])))
    assert paths == ["classification[0].rules" + "[0].rules" * 15]


def test_rules_nested_fifteen_deep_allowed() -> None:
    leaf: Doc = {"qualifier": "TN", "value": "X"}
    for _ in range(14):
        leaf = {"qualifier": "TN", "value": "X", "rules": [leaf]}
    definition = parse_definition(mutate(lambda d: d["classification"][0].update(rules=[leaf])))
    assert validate_definition(definition) == []


def test_resource_groups_are_checked_and_compiled() -> None:
    def grouped(d: Doc) -> None:
        d["resource_groups"] = [{"name": "limited", "max_in_flight": 3, "min_in_flight": 1}, {"name": "FLOOR", "min_in_flight": 2}]
        sc(d)["resource_group"] = "limited"

    definition = parse_definition(mutate(grouped))
    policy = compile_policy(1, definition)
    assert policy.resource_groups["LIMITED"] == GroupCap("LIMITED", 3, 1) and set(policy.resource_groups) == {"LIMITED", "FLOOR"}
    grouped_classes = {sc: g.name for sc, g in zip(policy.class_order, policy.class_groups, strict=True) if g is not None}
    assert grouped_classes == {sc(mutate(grouped))["name"].upper(): "LIMITED"}
    assert compile_policy(1, parse_definition(minimal())).class_groups == ()

    def broken(d: Doc) -> None:
        grouped(d)
        d["resource_groups"].append({"name": "LIMITED"})  # a second LIMITED
        d["resource_groups"][1]["max_in_flight"] = 1  # FLOOR's min above its max
        sc(d, 1)["resource_group"] = "NOPE"

    assert sorted(e["path"] for e in errors_of(mutate(broken))) == [
        "resource_groups[1].min_in_flight",
        "resource_groups[2].name",
        "service_classes[1].resource_group",
    ]
