"""Classification (spark_jobs/manager/classification.py) and the compiled policy (app/policy/active.py): pure, table-driven."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.policy.active import DEFAULT_NODE, ActivePolicy, compile_policy
from app.policy.schemas import (
    AverageGoal,
    ClassificationGroup,
    DiscretionaryGoal,
    PercentileGoal,
    Qualifier,
    ServiceDefinition,
    VelocityGoal,
)
from spark_jobs.manager.classification import (
    SYSOTHER,
    Classification,
    CompiledGroup,
    classify,
    compile_group,
)
from spark_jobs.manager.wildcards import wildcard_match

EXAMPLE_POLICY_PATH = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"

Q = Qualifier


# --------------------------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------------------------


def rule(qualifier: str, value: str, sc: str | None = None, rc: str | None = None, *children: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"qualifier": qualifier, "value": value}
    if sc is not None:
        doc["service_class"] = sc
    if rc is not None:
        doc["report_class"] = rc
    if children:
        doc["rules"] = list(children)
    return doc


def group(subsystem_type: str, default_sc: str, *rules: dict[str, Any], default_rc: str | None = None) -> ClassificationGroup:
    doc: dict[str, Any] = {"subsystem_type": subsystem_type, "default_service_class": default_sc, "rules": list(rules)}
    if default_rc is not None:
        doc["default_report_class"] = default_rc
    return ClassificationGroup.model_validate(doc)


def groups(*gs: ClassificationGroup) -> dict[str, CompiledGroup]:
    return {g.subsystem_type: compile_group(g) for g in gs}


def load_example_policy() -> ActivePolicy:
    definition = ServiceDefinition.model_validate(yaml.safe_load(EXAMPLE_POLICY_PATH.read_text()))
    return compile_policy(1, definition)


# --------------------------------------------------------------------------------------------------------------------
# Policies used by the classification table
# --------------------------------------------------------------------------------------------------------------------

# Wildcards, one rule per pattern, each with its own service class so the winner is visible.
WILDCARDS = groups(
    group(
        "WC",
        "DFLT",
        rule("TN", "PAY*", "PREFIX"),  # `*` at the end
        rule("TN", "*ROLL", "SUFFIX"),  # `*` at the start
        rule("TN", "AB*YZ", "MIDDLE"),  # `*` in the middle
        rule("TN", "Q?Z", "ONECHAR"),  # `?` exactly one character
        rule("TN", "A.B", "DOT"),  # `.` is literal
        rule("TN", "A+B", "PLUS"),  # `+` is literal
        rule("TN", "(X)|[Y]^$", "REGEXY"),  # every regex metacharacter is literal
        rule("TN", "??", "TWOCHARS"),
        rule("UI", "*", "ANYUSER"),  # `*` alone matches anything, a missing attribute too
    )
)

# Nesting three levels deep, with inheritance of service class and report class tested separately.
NESTED = groups(
    group(
        "NEST",
        "DFLT",
        rule(
            "SI",
            "PROD*",
            "L1SC",
            "L1RC",
            rule(
                "UI",
                "ADM?",
                None,  # inherits L1SC
                "L2RC",  # own report class
                rule("TN", "T1", "L3SC"),  # own service class, inherits L2RC
                rule("TN", "T2"),  # inherits both: L1SC / L2RC
                rule("TN", "T3", None, "L3RC"),  # inherits L1SC, own report class
            ),
            rule(
                "UI",
                "OPS*",
                "L2SC",  # own service class, inherits L1RC
                None,
                rule("TN", "?*", None, "ANYTNRC"),  # one or more characters; inherits L2SC
            ),
        ),
        default_rc="DFLTRC",
    )
)

# Top-level rules inherit blanks from the group defaults.
DEFAULTS = groups(
    group(
        "DEF",
        "DSC",
        rule("TN", "SCONLY", "OWNSC"),  # report class from default_report_class
        rule("TN", "RCONLY", None, "OWNRC"),  # service class from default_service_class
        rule("TN", "NONE"),  # both from the defaults
        default_rc="DRC",
    ),
    group("NORC", "DSC2", rule("TN", "X", "XSC")),  # no default report class: None throughout
)

# First match wins, at the top level and among nested rules; a rule that matches but whose children do not keeps its own
# assignment, and later siblings are never consulted.
ORDERING = groups(
    group(
        "ORD",
        "DFLT",
        rule("TN", "ABC", "EXACT"),
        rule("TN", "A*", "BROAD"),
        rule("TN", "*", "CATCHALL"),
        rule("TN", "ABC", "NEVER"),  # shadowed by the first rule
    ),
    group(
        "ORD2",
        "DFLT",
        rule(
            "UI",
            "U*",
            "PARENT",
            None,
            rule("TN", "T*", "CHILD1"),
            rule("TN", "TX", "CHILD2"),  # shadowed by CHILD1
            rule("TC", "C1", "CHILD3"),
        ),
        rule("UI", "USER1", "SECOND"),  # shadowed: the first rule matched, though no child did
    ),
)

EXAMPLE = load_example_policy()

CLASSIFICATION_TABLE: list[tuple[str, dict[str, CompiledGroup], str, dict[Qualifier, str], str, str | None, tuple[str, ...]]] = [
    # id, groups, subsystem type, attributes, expected service class, expected report class, expected matched rules
    # ---- wildcards
    ("star-suffix-exact-prefix", WILDCARDS, "WC", {Q.TN: "PAY"}, "PREFIX", None, ("TN=PAY*",)),
    ("star-suffix-longer", WILDCARDS, "WC", {Q.TN: "PAYROLL"}, "PREFIX", None, ("TN=PAY*",)),
    ("star-prefix", WILDCARDS, "WC", {Q.TN: "XROLL"}, "SUFFIX", None, ("TN=*ROLL",)),
    ("star-prefix-empty-run", WILDCARDS, "WC", {Q.TN: "ROLL"}, "SUFFIX", None, ("TN=*ROLL",)),
    ("star-middle", WILDCARDS, "WC", {Q.TN: "AB123YZ"}, "MIDDLE", None, ("TN=AB*YZ",)),
    ("star-middle-empty-run", WILDCARDS, "WC", {Q.TN: "ABYZ"}, "MIDDLE", None, ("TN=AB*YZ",)),
    ("star-middle-needs-suffix", WILDCARDS, "WC", {Q.TN: "AB123Y"}, "ANYUSER", None, ("UI=*",)),
    ("question-one-char", WILDCARDS, "WC", {Q.TN: "Q1Z"}, "ONECHAR", None, ("TN=Q?Z",)),
    ("question-not-zero-chars", WILDCARDS, "WC", {Q.TN: "QZ"}, "TWOCHARS", None, ("TN=??",)),
    ("question-not-two-chars", WILDCARDS, "WC", {Q.TN: "Q12Z"}, "ANYUSER", None, ("UI=*",)),
    ("question-matches-dot", WILDCARDS, "WC", {Q.TN: "Q.Z"}, "ONECHAR", None, ("TN=Q?Z",)),
    ("dot-literal", WILDCARDS, "WC", {Q.TN: "A.B"}, "DOT", None, ("TN=A.B",)),
    ("dot-not-any-char", WILDCARDS, "WC", {Q.TN: "AXB"}, "ANYUSER", None, ("UI=*",)),
    ("plus-literal", WILDCARDS, "WC", {Q.TN: "A+B"}, "PLUS", None, ("TN=A+B",)),
    ("plus-not-repetition", WILDCARDS, "WC", {Q.TN: "AAB"}, "ANYUSER", None, ("UI=*",)),
    ("regex-metachars-literal", WILDCARDS, "WC", {Q.TN: "(X)|[Y]^$"}, "REGEXY", None, ("TN=(X)|[Y]^$",)),
    ("regex-alternation-not-applied", WILDCARDS, "WC", {Q.TN: "X"}, "ANYUSER", None, ("UI=*",)),
    ("case-sensitive", WILDCARDS, "WC", {Q.TN: "payroll"}, "ANYUSER", None, ("UI=*",)),
    ("full-string-not-substring", WILDCARDS, "WC", {Q.TN: "XPAYX"}, "ANYUSER", None, ("UI=*",)),
    ("star-alone-matches-missing-attribute", WILDCARDS, "WC", {}, "ANYUSER", None, ("UI=*",)),
    ("star-alone-matches-empty-attribute", WILDCARDS, "WC", {Q.UI: ""}, "ANYUSER", None, ("UI=*",)),
    ("missing-attribute-is-blank", WILDCARDS, "WC", {Q.UI: "BOB"}, "ANYUSER", None, ("UI=*",)),
    ("other-qualifier-ignored", WILDCARDS, "WC", {Q.TC: "PAYROLL"}, "ANYUSER", None, ("UI=*",)),
    ("subsystem-type-case-insensitive", WILDCARDS, "wc", {Q.TN: "PAY"}, "PREFIX", None, ("TN=PAY*",)),
    # ---- nesting three levels deep and inheritance
    ("nest-l1-only", NESTED, "NEST", {Q.SI: "PROD1"}, "L1SC", "L1RC", ("SI=PROD*",)),
    ("nest-l2-inherits-sc-own-rc", NESTED, "NEST", {Q.SI: "PROD1", Q.UI: "ADM1"}, "L1SC", "L2RC", ("SI=PROD*", "UI=ADM?")),
    (
        "nest-l3-own-sc-inherits-rc",
        NESTED,
        "NEST",
        {Q.SI: "PROD1", Q.UI: "ADM1", Q.TN: "T1"},
        "L3SC",
        "L2RC",
        ("SI=PROD*", "UI=ADM?", "TN=T1"),
    ),
    (
        "nest-l3-inherits-both-across-levels",
        NESTED,
        "NEST",
        {Q.SI: "PROD1", Q.UI: "ADM1", Q.TN: "T2"},
        "L1SC",
        "L2RC",
        ("SI=PROD*", "UI=ADM?", "TN=T2"),
    ),
    (
        "nest-l3-inherits-sc-from-l1-own-rc",
        NESTED,
        "NEST",
        {Q.SI: "PROD1", Q.UI: "ADM1", Q.TN: "T3"},
        "L1SC",
        "L3RC",
        ("SI=PROD*", "UI=ADM?", "TN=T3"),
    ),
    (
        "nest-l3-no-child-match-keeps-l2",
        NESTED,
        "NEST",
        {Q.SI: "PROD1", Q.UI: "ADM1", Q.TN: "T9"},
        "L1SC",
        "L2RC",
        ("SI=PROD*", "UI=ADM?"),
    ),
    ("nest-l2-own-sc-inherits-rc", NESTED, "NEST", {Q.SI: "PRODX", Q.UI: "OPSX"}, "L2SC", "L1RC", ("SI=PROD*", "UI=OPS*")),
    (
        "nest-l3-under-other-l2",
        NESTED,
        "NEST",
        {Q.SI: "PRODX", Q.UI: "OPS", Q.TN: "Z"},
        "L2SC",
        "ANYTNRC",
        ("SI=PROD*", "UI=OPS*", "TN=?*"),
    ),
    ("nest-l2-ops-empty-tn", NESTED, "NEST", {Q.SI: "PRODX", Q.UI: "OPS", Q.TN: ""}, "L2SC", "L1RC", ("SI=PROD*", "UI=OPS*")),
    ("nest-children-only-after-parent", NESTED, "NEST", {Q.UI: "ADM1", Q.TN: "T1"}, "DFLT", "DFLTRC", ()),
    ("nest-no-match-defaults", NESTED, "NEST", {Q.SI: "TEST1"}, "DFLT", "DFLTRC", ()),
    # ---- group defaults
    ("default-rc-inherited-by-top-rule", DEFAULTS, "DEF", {Q.TN: "SCONLY"}, "OWNSC", "DRC", ("TN=SCONLY",)),
    ("default-sc-inherited-by-top-rule", DEFAULTS, "DEF", {Q.TN: "RCONLY"}, "DSC", "OWNRC", ("TN=RCONLY",)),
    ("both-defaults-inherited-by-top-rule", DEFAULTS, "DEF", {Q.TN: "NONE"}, "DSC", "DRC", ("TN=NONE",)),
    ("no-match-gets-defaults", DEFAULTS, "DEF", {Q.TN: "OTHER"}, "DSC", "DRC", ()),
    ("no-attributes-gets-defaults", DEFAULTS, "DEF", {}, "DSC", "DRC", ()),
    ("no-default-report-class", DEFAULTS, "NORC", {Q.TN: "X"}, "XSC", None, ("TN=X",)),
    ("no-default-report-class-no-match", DEFAULTS, "NORC", {Q.TN: "Y"}, "DSC2", None, ()),
    ("unknown-subsystem-type-sysother", DEFAULTS, "NOPE", {Q.TN: "SCONLY"}, SYSOTHER, None, ()),
    ("no-groups-sysother", {}, "DEF", {}, SYSOTHER, None, ()),
    # ---- first match wins
    ("first-match-exact-before-broad", ORDERING, "ORD", {Q.TN: "ABC"}, "EXACT", None, ("TN=ABC",)),
    ("first-match-broad", ORDERING, "ORD", {Q.TN: "ABD"}, "BROAD", None, ("TN=A*",)),
    ("first-match-catchall", ORDERING, "ORD", {Q.TN: "ZZZ"}, "CATCHALL", None, ("TN=*",)),
    ("first-match-catchall-missing", ORDERING, "ORD", {}, "CATCHALL", None, ("TN=*",)),
    ("first-match-nested", ORDERING, "ORD2", {Q.UI: "USER1", Q.TN: "TX"}, "CHILD1", None, ("UI=U*", "TN=T*")),
    (
        "first-match-nested-later-sibling",
        ORDERING,
        "ORD2",
        {Q.UI: "USER1", Q.TN: "XX", Q.TC: "C1"},
        "CHILD3",
        None,
        ("UI=U*", "TC=C1"),
    ),
    ("first-match-parent-without-child-match", ORDERING, "ORD2", {Q.UI: "USER1"}, "PARENT", None, ("UI=U*",)),
    # ---- the example policy
    ("example-atm-userid", EXAMPLE.classification, "CB", {Q.UI: "ATM01"}, "ONLINE", "ATMA", ("UI=ATM*",)),
    (
        "example-atm-cash",
        EXAMPLE.classification,
        "CB",
        {Q.UI: "ATM01", Q.TN: "CASH"},
        "ONLINE",
        "CASHA",
        ("UI=ATM*", "TN=CASH"),
    ),
    ("example-atm-other-tn", EXAMPLE.classification, "CB", {Q.UI: "ATM01", Q.TN: "DEPOSIT"}, "ONLINE", "ATMA", ("UI=ATM*",)),
    ("example-cash-without-atm", EXAMPLE.classification, "CB", {Q.TN: "CASH"}, "BATCH", None, ()),
    ("example-report", EXAMPLE.classification, "CB", {Q.TC: "RPT1"}, "REPORTS", "RPTS", ("TC=RPT?",)),
    ("example-report-too-long", EXAMPLE.classification, "CB", {Q.TC: "RPT12"}, "BATCH", None, ()),
    ("example-atm-wins-over-report", EXAMPLE.classification, "CB", {Q.UI: "ATM9", Q.TC: "RPT1"}, "ONLINE", "ATMA", ("UI=ATM*",)),
    ("example-lowercase-userid", EXAMPLE.classification, "CB", {Q.UI: "atm01"}, "BATCH", None, ()),
    ("example-nothing", EXAMPLE.classification, "CB", {}, "BATCH", None, ()),
    ("example-lowercase-subsystem-type", EXAMPLE.classification, "cb", {Q.UI: "ATM01"}, "ONLINE", "ATMA", ("UI=ATM*",)),
    ("example-unknown-subsystem-type", EXAMPLE.classification, "IMS", {Q.UI: "ATM01"}, SYSOTHER, None, ()),
]


@pytest.mark.parametrize(
    ("compiled", "subsystem_type", "attributes", "service_class", "report_class", "matched"),
    [pytest.param(*case[1:], id=case[0]) for case in CLASSIFICATION_TABLE],
)
def test_classify_table(
    compiled: dict[str, CompiledGroup],
    subsystem_type: str,
    attributes: dict[Qualifier, str],
    service_class: str,
    report_class: str | None,
    matched: tuple[str, ...],
) -> None:
    result = classify(compiled, subsystem_type, attributes)
    assert result == Classification(service_class, report_class, matched)


def test_classification_table_ids_are_unique() -> None:
    ids = [case[0] for case in CLASSIFICATION_TABLE]
    assert len(ids) == len(set(ids))


# --------------------------------------------------------------------------------------------------------------------
# wildcard_pattern
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("ABC", "ABC", True),
        ("ABC", "ABCD", False),
        ("ABC", "XABC", False),
        ("ABC", "abc", False),
        ("*", "", True),
        ("*", "ANYTHING AT ALL", True),
        ("*", "multi\nline", True),
        ("**", "", True),
        ("A*", "A", True),
        ("A*", "ABC", True),
        ("A*", "BA", False),
        ("*A", "BA", True),
        ("*A", "AB", False),
        ("A*B", "AB", True),
        ("A*B", "AXXXB", True),
        ("A*B", "AXXXBC", False),
        ("?", "", False),
        ("?", "X", True),
        ("?", "XY", False),
        ("?", "\n", True),
        ("A?C", "ABC", True),
        ("A?C", "AC", False),
        ("???", "ABC", True),
        ("?*", "", False),
        ("?*", "A", True),
        ("A.B", "A.B", True),
        ("A.B", "AXB", False),
        ("A+B", "A+B", True),
        ("A+B", "AAB", False),
        ("A|B", "A", False),
        ("A|B", "A|B", True),
        ("[AB]", "A", False),
        ("[AB]", "[AB]", True),
        ("A{2}", "AA", False),
        ("A{2}", "A{2}", True),
        ("^A$", "^A$", True),
        ("\\d", "1", False),
        ("\\d", "\\d", True),
        ("(A)", "(A)", True),
    ],
)
def test_wildcard_pattern(pattern: str, value: str, matches: bool) -> None:
    assert wildcard_match(pattern, value) is matches


def test_wildcards_take_linear_time_on_pathological_patterns() -> None:
    # A translated regular expression backtracks exponentially here (17 s measured for 256 characters).
    assert not wildcard_match("*A*A*A*A*A*A*B", "A" * 10_000)
    assert wildcard_match("*A*A*A*A*A*A*B", "A" * 10_000 + "B")


# --------------------------------------------------------------------------------------------------------------------
# compile_group
# --------------------------------------------------------------------------------------------------------------------


def test_compile_group_applies_inheritance() -> None:
    compiled = compile_group(
        group(
            "cb",
            "dflt",
            rule("ui", "A*", None, None, rule("TN", "X", "CHILD"), rule("TN", "Y", None, "CHILDRC")),
            rule("UI", "B*", "OWN", "OWNRC"),
            default_rc="drc",
        )
    )
    assert compiled.subsystem_type == "CB"
    assert compiled.default_service_class == "DFLT"
    assert compiled.default_report_class == "DRC"
    first, second = compiled.rules
    assert (first.qualifier, first.value, first.service_class, first.report_class) == (Q.UI, "A*", "DFLT", "DRC")
    assert first.label == "UI=A*"
    x, y = first.children
    assert (x.service_class, x.report_class, x.label) == ("CHILD", "DRC", "TN=X")
    assert (y.service_class, y.report_class, y.label) == ("DFLT", "CHILDRC", "TN=Y")
    assert (second.service_class, second.report_class, second.children) == ("OWN", "OWNRC", ())


def test_compile_group_without_rules() -> None:
    compiled = compile_group(group("CB", "BATCH"))
    assert compiled.rules == ()
    assert classify({"CB": compiled}, "CB", {Q.UI: "ANY"}) == Classification("BATCH", None, ())


def test_rule_values_are_not_upper_cased() -> None:
    # Names are upper-cased, rule values are not: matching is case-sensitive.
    compiled = compile_group(group("CB", "BATCH", rule("UI", "atm*", "online")))
    assert compiled.rules[0].value == "atm*"
    assert compiled.rules[0].service_class == "ONLINE"
    assert classify({"CB": compiled}, "CB", {Q.UI: "atm1"}).service_class == "ONLINE"
    assert classify({"CB": compiled}, "CB", {Q.UI: "ATM1"}).service_class == "BATCH"


def test_attributes_keyed_by_plain_strings() -> None:
    compiled = {"CB": compile_group(group("CB", "BATCH", rule("UI", "ATM*", "ONLINE")))}
    assert classify(compiled, "CB", {"UI": "ATM1"}).service_class == "ONLINE"  # type: ignore[dict-item]


# --------------------------------------------------------------------------------------------------------------------
# compile_policy
# --------------------------------------------------------------------------------------------------------------------


def definition(**overrides: Any) -> ServiceDefinition:
    doc: dict[str, Any] = {
        "name": "TEST",
        "service_classes": [
            {"name": "ONLINE", "description": "fast", "importance": 1, "goal": {"type": "average", "response_time_ms": 100}},
            {
                "name": "BATCH",
                "periods": [
                    {"duration_ms": 1000, "importance": 2, "goal": {"type": "percentile", "percentile": 80, "response_time_ms": 500}},
                    {"duration_ms": 5000, "importance": 3, "goal": {"type": "velocity", "velocity": 30}},
                    {"goal": {"type": "discretionary"}},
                ],
            },
            {"name": "IDLE", "goal": {"type": "discretionary"}},
        ],
    }
    doc.update(overrides)
    return ServiceDefinition.model_validate(doc)


def test_compile_policy_single_period_class() -> None:
    policy = compile_policy(7, definition())
    assert policy.version == 7
    online = policy.service_classes["ONLINE"]
    assert online.name == "ONLINE"
    assert online.description == "fast"
    assert len(online.periods) == 1
    period = online.periods[0]
    assert period.number == 1
    assert period.duration_ms is None
    assert period.importance == 1
    assert period.goal == AverageGoal(type="average", response_time_ms=100)


def test_compile_policy_single_period_discretionary_without_importance() -> None:
    idle = compile_policy(1, definition()).service_classes["IDLE"]
    assert [(p.number, p.duration_ms, p.importance, p.goal) for p in idle.periods] == [
        (1, None, None, DiscretionaryGoal(type="discretionary"))
    ]


def test_compile_policy_multi_period_numbering() -> None:
    batch = compile_policy(1, definition()).service_classes["BATCH"]
    assert [(p.number, p.duration_ms, p.importance) for p in batch.periods] == [(1, 1000, 2), (2, 5000, 3), (3, None, None)]
    assert batch.periods[0].goal == PercentileGoal(type="percentile", percentile=80, response_time_ms=500)
    assert batch.periods[1].goal == VelocityGoal(type="velocity", velocity=30)
    assert batch.periods[2].goal == DiscretionaryGoal(type="discretionary")


def test_compile_policy_has_sysother() -> None:
    policy = compile_policy(1, definition())
    assert set(policy.service_classes) == {SYSOTHER, "ONLINE", "BATCH", "IDLE"}
    sysother = policy.service_classes[SYSOTHER]
    assert sysother.name == SYSOTHER
    assert len(sysother.periods) == 1
    assert sysother.periods[0].number == 1
    assert sysother.periods[0].duration_ms is None
    assert sysother.periods[0].goal.type == "discretionary"


def test_compile_policy_mappings_are_read_only() -> None:
    policy = compile_policy(1, definition())
    with pytest.raises(TypeError):
        policy.service_classes["X"] = policy.service_classes["ONLINE"]  # type: ignore[index]
    with pytest.raises(TypeError):
        policy.classification["X"] = None  # type: ignore[index]


def test_compile_policy_implicit_local_node() -> None:
    policy = compile_policy(1, definition())
    assert DEFAULT_NODE == "LOCAL"
    assert policy.nodes == ("LOCAL",)


def test_compile_policy_named_nodes_replace_local() -> None:
    policy = compile_policy(1, definition(nodes=[{"name": "node1"}, {"name": "NODE2"}]))
    assert policy.nodes == ("NODE1", "NODE2")


def test_compile_policy_classify_uses_groups() -> None:
    policy = compile_policy(
        1,
        definition(
            report_classes=["RC"],
            classification=[
                {
                    "subsystem_type": "cb",
                    "default_service_class": "BATCH",
                    "rules": [{"qualifier": "UI", "value": "ATM*", "service_class": "ONLINE", "report_class": "RC"}],
                }
            ],
        ),
    )
    assert set(policy.classification) == {"CB"}
    assert policy.classify("CB", {Q.UI: "ATM1"}) == Classification("ONLINE", "RC", ("UI=ATM*",))
    assert policy.classify("cb", {Q.UI: "X"}) == Classification("BATCH", None, ())
    assert policy.classify("STC", {Q.UI: "ATM1"}) == Classification(SYSOTHER, None, ())


HOSTS_DEFINITION = definition(
    nodes=[{"name": "N1"}, {"name": "N2"}, {"name": "N3"}],
    application_environments=[
        {"name": "EVERYWHERE", "subsystem_type": "CB"},
        {"name": "PINNED", "subsystem_type": "CB", "nodes": ["N1", "N2"]},
    ],
)


@pytest.mark.parametrize(
    ("application_environment", "node", "expected"),
    [
        pytest.param("EVERYWHERE", "N1", True, id="no-nodes-listed-any-node"),
        pytest.param("EVERYWHERE", "N3", True, id="no-nodes-listed-any-node-2"),
        pytest.param("EVERYWHERE", "N9", False, id="unknown-node"),
        pytest.param("EVERYWHERE", "LOCAL", False, id="local-not-implicit-with-named-nodes"),
        pytest.param("PINNED", "N1", True, id="pinned-listed"),
        pytest.param("PINNED", "N2", True, id="pinned-listed-2"),
        pytest.param("PINNED", "N3", False, id="pinned-known-node-not-listed"),
        pytest.param("PINNED", "N9", False, id="pinned-unknown-node"),
        pytest.param("NOPE", "N1", False, id="unknown-application-environment"),
    ],
)
def test_hosts(application_environment: str, node: str, expected: bool) -> None:
    assert compile_policy(1, HOSTS_DEFINITION).hosts(application_environment, node) is expected


def test_hosts_with_implicit_local_node() -> None:
    policy = compile_policy(1, definition(application_environments=[{"name": "AE", "subsystem_type": "CB"}]))
    assert policy.hosts("AE", "LOCAL") is True
    assert policy.hosts("AE", "OTHER") is False
    assert policy.hosts("NOPE", "LOCAL") is False


def test_example_policy_compiles() -> None:
    policy = load_example_policy()
    assert policy.version == 1
    assert policy.definition.name == "PRODPLEX"
    assert set(policy.service_classes) == {SYSOTHER, "ONLINE", "BATCH", "REPORTS"}
    assert [p.number for p in policy.service_classes["BATCH"].periods] == [1, 2]
    assert policy.service_classes["BATCH"].periods[0].duration_ms == 5000
    assert policy.service_classes["ONLINE"].periods[0].goal == PercentileGoal(type="percentile", percentile=90, response_time_ms=250)
    assert policy.nodes == ("LOCAL",)
    assert set(policy.application_environments) == {"PAYROLL"}
    assert policy.hosts("PAYROLL", "LOCAL") is True
    assert policy.hosts("PAYROLL", "NODE1") is False
