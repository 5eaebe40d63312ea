"""SAF-style generic resource profiles (app/auth/profiles.py): pure, table-driven."""

from __future__ import annotations

import re

import pytest

from app.auth.profiles import PROFILE_PATTERN, is_permitted, server_resource

# (id, profiles, resource, expected)
PERMIT_TABLE: list[tuple[str, list[str], str, bool]] = [
    # ---- exact
    ("exact", ["CB.SUB1.PAYROLL"], "CB.SUB1.PAYROLL", True),
    ("exact-with-node", ["CB.SUB1.PAYROLL.NODE1"], "CB.SUB1.PAYROLL.NODE1", True),
    ("exact-other-ae", ["CB.SUB1.PAYROLL"], "CB.SUB1.BILLING", False),
    ("exact-shorter-profile", ["CB.SUB1.PAYROLL"], "CB.SUB1.PAYROLL.NODE1", False),
    ("exact-longer-profile", ["CB.SUB1.PAYROLL.NODE1"], "CB.SUB1.PAYROLL", False),
    ("exact-prefix-of-qualifier", ["CB.SUB1.PAY"], "CB.SUB1.PAYROLL", False),
    ("exact-different-subsystem-type", ["CB.SUB1.PAYROLL"], "IMS.SUB1.PAYROLL", False),
    ("different-subsystem-type-generic", ["CB.**"], "IMS.SUB1.PAYROLL", False),
    ("different-subsystem-type-star", ["CB.*.*"], "DB2.SUB1.PAYROLL", False),
    # ---- case-insensitive
    ("lowercase-profile", ["cb.sub1.payroll"], "CB.SUB1.PAYROLL", True),
    ("lowercase-resource", ["CB.SUB1.PAYROLL"], "cb.sub1.payroll", True),
    ("mixed-case-generic", ["cb.Sub%.*"], "CB.SUB1.PAYROLL", True),
    # ---- `*`: any characters within one qualifier
    ("star-one-qualifier", ["CB.*.PAYROLL"], "CB.SUB1.PAYROLL", True),
    ("star-not-two-qualifiers", ["CB.*.PAYROLL"], "CB.SUB1.X.PAYROLL", False),
    ("star-not-extra-trailing-qualifier", ["CB.*.PAYROLL"], "CB.SUB1.PAYROLL.NODE1", False),
    ("star-not-zero-qualifiers", ["CB.*.PAYROLL"], "CB.PAYROLL", False),
    ("star-last-qualifier", ["CB.SUB1.*"], "CB.SUB1.PAYROLL", True),
    ("star-last-qualifier-not-node", ["CB.SUB1.*"], "CB.SUB1.PAYROLL.NODE1", False),
    ("stars-every-qualifier", ["*.*.*"], "CB.SUB1.PAYROLL", True),
    ("stars-every-qualifier-with-node", ["*.*.*.*"], "CB.SUB1.PAYROLL.NODE1", True),
    ("stars-too-few", ["*.*"], "CB.SUB1.PAYROLL", False),
    ("star-alone-one-qualifier", ["*"], "CB", True),
    ("star-alone-not-three-qualifiers", ["*"], "CB.SUB1.PAYROLL", False),
    ("star-within-qualifier", ["CB.S*1.PAY*"], "CB.SUB1.PAYROLL", True),
    ("star-within-qualifier-empty-run", ["CB.S*1.PAY*"], "CB.S1.PAY", True),
    ("star-within-qualifier-mismatch", ["CB.S*1.PAY*"], "CB.SUB2.PAYROLL", False),
    ("star-within-qualifier-not-across-dot", ["CB.S*1"], "CB.SUB.X1", False),
    ("star-prefix-in-qualifier", ["CB.SUB1.*ROLL"], "CB.SUB1.PAYROLL", True),
    # ---- `%`: exactly one character
    ("percent-one-char", ["CB.SUB%.PAYROLL"], "CB.SUB1.PAYROLL", True),
    ("percent-not-zero-chars", ["CB.SUB%.PAYROLL"], "CB.SUB.PAYROLL", False),
    ("percent-not-two-chars", ["CB.SUB%.PAYROLL"], "CB.SUB12.PAYROLL", False),
    ("percents", ["CB.%%%%.PAYROLL"], "CB.SUB1.PAYROLL", True),
    ("percent-not-dot", ["CB%SUB1.PAYROLL"], "CB.SUB1.PAYROLL", False),
    # ---- `**`: zero or more qualifiers
    ("double-star-alone", ["**"], "CB.SUB1.PAYROLL", True),
    ("double-star-alone-with-node", ["**"], "CB.SUB1.PAYROLL.NODE1", True),
    ("double-star-alone-one-qualifier", ["**"], "X", True),
    ("double-star-suffix", ["CB.**"], "CB.SUB1.PAYROLL", True),
    ("double-star-suffix-with-node", ["CB.**"], "CB.SUB1.PAYROLL.NODE1", True),
    ("double-star-suffix-zero-qualifiers", ["CB.**"], "CB", True),
    ("double-star-prefix", ["**.PAYROLL"], "CB.SUB1.PAYROLL", True),
    ("double-star-prefix-not-with-node", ["**.PAYROLL"], "CB.SUB1.PAYROLL.NODE1", False),
    ("double-star-prefix-zero-qualifiers", ["**.PAYROLL"], "PAYROLL", True),
    ("double-star-middle", ["CB.**.NODE1"], "CB.SUB1.PAYROLL.NODE1", True),
    ("double-star-middle-zero-qualifiers", ["CB.**.NODE1"], "CB.NODE1", True),
    ("double-star-middle-no-node", ["CB.**.NODE1"], "CB.SUB1.PAYROLL", False),
    ("double-star-middle-other-node", ["CB.**.NODE1"], "CB.SUB1.PAYROLL.NODE2", False),
    ("double-star-middle-other-type", ["CB.**.NODE1"], "IMS.SUB1.PAYROLL.NODE1", False),
    ("double-star-then-star", ["CB.**.*"], "CB.SUB1.PAYROLL", True),
    ("double-star-then-star-needs-one", ["CB.**.*"], "CB", False),
    ("double-star-twice", ["**.SUB1.**"], "CB.SUB1.PAYROLL.NODE1", True),
    ("double-star-twice-missing", ["**.SUB2.**"], "CB.SUB1.PAYROLL.NODE1", False),
    ("double-star-with-generic-qualifier", ["CB.**.PAY*"], "CB.SUB1.PAYROLL", True),
    # ---- regex characters are literal
    ("dollar-literal", ["CB.SUB$.PAYROLL"], "CB.SUB$.PAYROLL", True),
    ("hash-at-literal", ["CB.#SUB@.PAYROLL"], "CB.#SUB@.PAYROLL", True),
    ("dash-literal", ["CB.SUB-1.PAYROLL"], "CB.SUB-1.PAYROLL", True),
    ("dollar-not-end-anchor", ["CB.SUB$.PAYROLL"], "CB.SUB.PAYROLL", False),
    # ---- several profiles: any one suffices
    ("empty-profile-list", [], "CB.SUB1.PAYROLL", False),
    ("second-profile-matches", ["IMS.**", "CB.SUB1.*"], "CB.SUB1.PAYROLL", True),
    ("no-profile-matches", ["IMS.**", "CB.SUB2.*", "CB.*.PAYROLL.NODE2"], "CB.SUB1.PAYROLL.NODE1", False),
]


@pytest.mark.parametrize(
    ("profiles", "resource", "expected"),
    [pytest.param(profiles, resource, expected, id=case_id) for case_id, profiles, resource, expected in PERMIT_TABLE],
)
def test_is_permitted(profiles: list[str], resource: str, expected: bool) -> None:
    assert is_permitted(profiles, resource) is expected


def test_permit_table_ids_are_unique() -> None:
    ids = [case[0] for case in PERMIT_TABLE]
    assert len(ids) == len(set(ids))


def test_profiles_may_be_any_iterable() -> None:
    assert is_permitted(iter(["CB.**"]), "CB.SUB1.PAYROLL") is True
    assert is_permitted((p for p in ["IMS.**"]), "CB.SUB1.PAYROLL") is False


@pytest.mark.parametrize(
    ("profile", "valid"),
    [
        ("CB.SUB1.PAYROLL", True),
        ("CB.**", True),
        ("**", True),
        ("CB.SUB%.*", True),
        ("cb.$#@_-", True),
        ("CB..PAYROLL", False),
        (".CB", False),
        ("CB.", False),
        ("", False),
        ("CB SUB", False),
        ("CB.SUB?.X", False),
    ],
)
def test_profile_pattern(profile: str, valid: bool) -> None:
    assert (re.fullmatch(PROFILE_PATTERN, profile) is not None) is valid


@pytest.mark.parametrize(
    ("subsystem_type", "subsystem_name", "application_environment", "node", "expected"),
    [
        pytest.param("CB", "SUB1", "PAYROLL", None, "CB.SUB1.PAYROLL", id="without-node"),
        pytest.param("CB", "SUB1", "PAYROLL", "NODE1", "CB.SUB1.PAYROLL.NODE1", id="with-node"),
        pytest.param("CB", "SUB1", "PAYROLL", "", "CB.SUB1.PAYROLL", id="empty-node-is-none"),
        pytest.param("cb", "sub1", "payroll", "node1", "CB.SUB1.PAYROLL.NODE1", id="upper-cased"),
    ],
)
def test_server_resource(subsystem_type: str, subsystem_name: str, application_environment: str, node: str | None, expected: str) -> None:
    assert server_resource(subsystem_type, subsystem_name, application_environment, node) == expected


@pytest.mark.parametrize(
    ("profiles", "node", "expected"),
    [
        pytest.param(["CB.SUB1.PAYROLL"], None, True, id="exact-without-node"),
        pytest.param(["CB.SUB1.PAYROLL"], "NODE1", False, id="exact-profile-does-not-cover-node"),
        pytest.param(["CB.SUB1.PAYROLL.*"], "NODE1", True, id="any-node"),
        pytest.param(["CB.SUB1.PAYROLL.*"], None, False, id="any-node-needs-a-node"),
        pytest.param(["CB.SUB1.PAYROLL.**"], None, True, id="double-star-with-or-without-node"),
        pytest.param(["CB.SUB1.PAYROLL.**"], "NODE1", True, id="double-star-with-node"),
        pytest.param(["cb.*.payroll.node1"], "node1", True, id="case-insensitive"),
    ],
)
def test_server_resource_is_permitted(profiles: list[str], node: str | None, expected: bool) -> None:
    assert is_permitted(profiles, server_resource("cb", "sub1", "payroll", node)) is expected
