"""The OpenAPI document as client generators read it (app/openapi.py): operation ids, and the error statuses of
each operation with the one error body."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from app.config import Settings
from app.main import create_app
from app.openapi import DOMAIN_ERRORS
from app.policy.schemas import ServiceDefinition
from app.policy.validation import validate_definition

ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


@pytest.fixture
def spec(tmp_path: Path) -> dict[str, Any]:
    return create_app(Settings(data_dir=tmp_path / "data")).openapi()


def _operations(spec: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """(path, operation) by operation id."""
    return {operation["operationId"]: (path, operation) for path, operations in spec["paths"].items() for operation in operations.values()}


def test_every_operation_has_a_unique_readable_id(spec):
    ids = [operation["operationId"] for operations in spec["paths"].values() for operation in operations.values()]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", i)] == []
    assert {"work-insert", "work-create-enclave", "work-select", "work-begin", "work-end", "connections-connect"} <= set(ids)
    # The tag is not repeated, and an endpoint named as its tag takes its method.
    assert {"operator-command", "scheduler-get", "policy-install-policy", "health-readyz"} <= set(ids)


def test_the_table_of_domain_errors_names_only_served_operations(spec):
    assert set(DOMAIN_ERRORS) - set(_operations(spec)) == set()


def test_every_error_status_is_declared_with_the_error_body(spec):
    for operation_id, (path, operation) in _operations(spec).items():
        errors = {status: response for status, response in operation["responses"].items() if int(status) >= 400}
        for status, response in errors.items():
            assert response["content"] == ERROR_BODY, (operation_id, status)
        statuses = set(errors)
        if path.startswith("/v1/"):
            assert {"401", "403", "503"} <= statuses, operation_id
        if "parameters" in operation or "requestBody" in operation:
            assert {"400", "422"} <= statuses, operation_id
        if "requestBody" in operation:
            assert "413" in statuses, operation_id
    assert "HTTPValidationError" not in spec["components"]["schemas"]


@pytest.mark.parametrize(
    ("operation_id", "statuses"),
    [
        ("health-healthz", set()),
        ("health-readyz", {"503"}),
        ("access-whoami", {"401", "403", "503"}),
        ("policy-get-policy", {"401", "403", "404", "503"}),
        ("policy-install-policy", {"400", "401", "403", "409", "413", "415", "422", "503"}),
        ("work-insert", {"400", "401", "403", "404", "409", "413", "422", "429", "503"}),
        ("work-begin", {"400", "401", "403", "404", "409", "413", "422", "503"}),
        ("scheduler-events", {"400", "401", "403", "422", "429", "503"}),
    ],
)
def test_an_operation_declares_the_errors_it_can_answer(spec, operation_id, statuses):
    _, operation = _operations(spec)[operation_id]
    assert {status for status in operation["responses"] if int(status) >= 400} == statuses


def test_the_policy_body_is_declared_as_json_and_yaml(spec):
    _, operation = _operations(spec)["policy-install-policy"]
    content = operation["requestBody"]["content"]
    assert set(content) == {"application/json", "application/yaml"}
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/ServiceDefinition"}


def _validator(spec: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    """A validator of the component `name`, its references resolved within the document."""
    document = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    return jsonschema.Draft202012Validator(document)


def test_parameters_are_declared_as_checked_never_null_and_without_nul(spec):
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema, where = parameter["schema"], f"{method} {path} {parameter['name']}"
                assert "anyOf" not in schema and schema.get("type") != "null", where  # absent, never the text "null"
                if schema.get("type") == "string" and "enum" not in schema and "format" not in schema:
                    assert "pattern" in schema, where
    events = spec["paths"]["/v1/events"]["get"]["parameters"]
    last_event_id = next(p["schema"] for p in events if p["name"] == "last-event-id")
    assert last_event_id["type"] == "string" and last_event_id["pattern"] == r"^(0|[0-9]{1,19}-[0-9]{1,19})$"
    token = next(p["schema"] for p in spec["paths"]["/v1/enclaves/{token}"]["delete"]["parameters"] if p["name"] == "token")
    assert re.search(token["pattern"], "enc-1") and not re.search(token["pattern"], "enc\x00-1")


def test_a_bulk_dead_letter_body_declares_that_it_needs_a_filter_or_all(spec):
    bulk = _validator(spec, "BulkRetryIn")
    assert not bulk.is_valid({}) and not bulk.is_valid({"all": False}) and not bulk.is_valid({"node": None, "position": "front"})
    assert bulk.is_valid({"all": True}) and bulk.is_valid({"node": "N1"}) and bulk.is_valid({"reason": "failed", "position": "front"})


def test_a_routing_change_declares_that_it_names_an_attribute(spec):
    for name in ("NodeRoutingPatch", "LinkRoutingPatch", "InstanceRoutingPatch"):
        change = _validator(spec, name)
        assert not change.is_valid({}), name
    assert _validator(spec, "NodeRoutingPatch").is_valid({"weight": None})  # a null names one: back to the policy's


def test_classification_attributes_declare_the_names_the_service_takes(spec):
    classify = _validator(spec, "ClassifyIn")
    for name in ("userid", "transaction_name", "TN", "tn", "Spm"):
        assert classify.is_valid({"subsystem_type": "CICS", "attributes": {name: "X"}}), name
    for name in ("USERID", "__main__", "user id"):
        assert not classify.is_valid({"subsystem_type": "CICS", "attributes": {name: "X"}}), name
    assert not classify.is_valid({"subsystem_type": "CICS", "attributes": {"userid": "a\x00b"}})


def test_an_end_declares_that_only_a_failure_goes_to_the_dead_letters(spec):
    for name in ("EndRequest", "EndInSelect"):
        end = _validator(spec, name)
        token = {"connect_token": "c"} if name == "EndRequest" else {"token": "t"}
        assert not end.is_valid({**token, "dead_letter": True}) and not end.is_valid({**token, "dead_letter": True, "outcome": "completed"})
        assert end.is_valid({**token, "dead_letter": True, "outcome": "failed"}) and end.is_valid({**token, "dead_letter": False}), name


def test_report_and_dead_letter_parameters_declare_what_they_take(spec):
    def parameter(path: str, name: str) -> dict[str, Any]:
        return next(p["schema"] for p in spec["paths"][path]["get"]["parameters"] if p["name"] == name)

    interval = parameter("/v1/reports/workload", "interval")["pattern"]
    assert all(re.search(interval, v) for v in ("1", "15", "1440", "ALL", "all")), interval
    assert not any(re.search(interval, v) for v in ("0", "1441", "x", ""))
    cursor = parameter("/v1/dead-letters", "cursor")["pattern"]
    assert re.search(cursor, "1795737600000_N1~PAYROLL~42") and not re.search(cursor, "")


def test_a_mapping_declares_the_keys_the_service_takes(spec):
    instances = spec["components"]["schemas"]["DynamicApplicationEnvironmentIn"]["properties"]["instances"]
    assert "patternProperties" not in instances
    assert instances["propertyNames"] == {"minLength": 1, "maxLength": 32, "pattern": "^[A-Za-z0-9$#@_][A-Za-z0-9$#@_.-]*$"}
    assert instances["additionalProperties"] == {"$ref": "#/components/schemas/InstanceRouting"}
    declared = instances | {"components": spec["components"]}
    jsonschema.validate({"ROME": {}}, declared)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"ROME!": {}}, declared)


ONLINE_GOAL = {"type": "average", "response_time_ms": 100}


@pytest.mark.parametrize(
    ("service_class", "valid"),
    [
        ({"name": "A", "importance": 1, "goal": ONLINE_GOAL}, True),
        ({"name": "A", "goal": {"type": "discretionary"}, "periods": None}, True),
        ({"name": "A", "periods": [{"importance": 1, "goal": ONLINE_GOAL}], "goal": None}, True),
        ({"name": "A"}, False),
        ({"name": "A", "importance": 1}, False),
        ({"name": "A", "goal": None, "periods": None}, False),
        ({"name": "A", "goal": ONLINE_GOAL, "periods": [{"importance": 1, "goal": ONLINE_GOAL}]}, False),
        ({"name": "A", "importance": 1, "periods": [{"importance": 1, "goal": ONLINE_GOAL}]}, False),
        ({"name": "A", "periods": []}, False),
        ({"name": "A", "periods": [{"importance": 1, "duration_ms": 1, "goal": ONLINE_GOAL}] * 8 + [{"goal": ONLINE_GOAL}]}, False),
    ],
)
def test_a_service_class_declares_a_goal_or_periods(spec, service_class, valid):
    """The schema says what app.policy.validation checks of a class's periods: either one goal or 1 to 8 periods."""
    assert _validator(spec, "ServiceClass").is_valid(service_class) == valid
    definition = ServiceDefinition.model_validate({"name": "P", "service_classes": [service_class]})
    # ... and the service refuses what the schema refuses (it checks more: see the description of PUT /v1/policy).
    assert (not [p for p in validate_definition(definition) if p["path"].startswith("service_classes[0]")]) == valid
