"""A definition's plain data classifies as the service's compiled policy does: the what-if job reads a candidate's
groups by `groups_of` (without the service's models), the service compiles its checked models; one set of rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.policy.active import compile_policy
from app.policy.schemas import ServiceDefinition
from spark_jobs.manager.classification import Classification, classify, groups_of

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "policy.yaml"


@pytest.mark.parametrize(
    ("subsystem_type", "attributes", "expected"),
    [
        ("CB", {"UI": "ATM7", "TN": "CASH"}, Classification("ONLINE", "CASHA", ("UI=ATM*", "TN=CASH"))),
        ("CB", {"UI": "ATM7"}, Classification("ONLINE", "ATMA", ("UI=ATM*",))),
        ("CB", {"TC": "RPT1"}, Classification("REPORTS", "RPTS", ("TC=RPT?",))),
        ("CB", {}, Classification("BATCH", None, ())),
        ("cb", {"UI": "X"}, Classification("BATCH", None, ())),
        ("STC", {"UI": "ATM7"}, Classification("SYSOTHER", None, ())),
    ],
)
def test_plain_data_classifies_as_the_compiled_policy(subsystem_type: str, attributes: dict[str, str], expected: Classification) -> None:
    definition = ServiceDefinition.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    policy = compile_policy(1, definition)
    plain = groups_of(definition.model_dump(mode="json", exclude_none=True))
    assert classify(plain, subsystem_type, attributes) == policy.classify(subsystem_type, attributes) == expected  # type: ignore[arg-type]


def test_a_qualifier_in_any_case_is_read_as_its_abbreviation() -> None:
    groups = groups_of(
        {
            "classification": [
                {"subsystem_type": "CB", "default_service_class": "B", "rules": [{"qualifier": "ui", "value": "A*", "service_class": "O"}]}
            ]
        }
    )
    assert classify(groups, "CB", {"UI": "AB"}) == Classification("O", None, ("UI=A*",))
    assert classify(groups, "CB", {"UI": "BA"}) == Classification("B", None, ())
