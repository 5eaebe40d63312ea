"""The OpenAPI document as client generators read it (app/openapi.py): operation ids, and the error statuses of
each operation with the one error body."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.main import create_app
from app.openapi import DOMAIN_ERRORS

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
