"""The OpenAPI document, made for client generators: a stable, readable id per operation, the error statuses each
operation can answer with the one error body (app.errors), the service definition's schema and the bearer scheme.
Ids and most statuses are derived from the routes, so a route added later gets them too; what its services raise
beyond those is listed in DOMAIN_ERRORS."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.errors import ERROR_DESCRIPTIONS, ErrorBody
from app.policy.schemas import ServiceDefinition
from app.web.custom_methods import FORMER_PATH_SUFFIX

# Every route under it needs an API key (read by app.deps.principal_of): health and metrics do not.
AUTHENTICATED_PREFIX = "/v1/"
COMPONENTS = "#/components/schemas/"

# The statuses an operation's services answer beyond those its shape tells (see error_statuses): unknown
# resources and tokens, and the "no policy installed yet" of every operation that needs the active policy (404);
# a resource in the wrong state (409); a body that is neither YAML nor JSON (415); a full queue or replica (429).
# An operation not listed may answer 404 and 409 (UNLISTED_DOMAIN_ERRORS): a client is better told of a status
# that never comes than surprised by one that was not declared.
DOMAIN_ERRORS: dict[str, tuple[int, ...]] = {
    "health-healthz": (),
    "health-readyz": (503,),
    "health-metrics": (),
    "policy-install-policy": (409, 415),
    "policy-get-policy": (404,),
    "policy-list-versions": (),
    "policy-get-version": (404,),
    "policy-classify": (404,),
    "application-environments-define-dynamic-environment": (404, 409),
    "operator-command": (404, 409),
    "operator-list-commands": (),
    "operator-display-application-environments": (),
    "operator-display-application-environment": (404,),
    "connections-connect": (404, 409),
    "connections-list-connections": (),
    "connections-heartbeat": (404, 409),
    "connections-disconnect": (404,),
    "work-create-enclave": (404, 409),
    "work-delete-enclave": (404, 409),
    "work-insert": (404, 409, 429),
    "work-insert-batch": (404, 409, 429),
    "work-select": (404, 409),
    "work-begin": (404, 409),
    "work-end": (404, 409),
    "work-delete": (404, 409),
    "work-status": (404,),
    "goals-and-servers-performance": (404,),
    "goals-and-servers-server-instances": (404, 409),
    "goals-and-servers-scaling": (404,),
    "goals-and-servers-set-server-limits": (404, 409),
    "goals-and-servers-server-limits": (404,),
    "goals-and-servers-reset-server-limits": (404,),
    "reports-workload-report": (),
    "reports-workload-report-dates": (),
    "reports-workload-summary": (404,),
    "reports-submit-what-if": (404,),
    "reports-get-what-if": (404,),
    "reports-cancel-what-if": (404, 409),
    "routing-explain": (404,),
    "routing-list-nodes": (404,),
    "routing-alter-node": (404, 409),
    "routing-alter-instance": (404, 409),
    "routing-alter-link": (404,),
    "scheduler-get": (),
    "scheduler-events": (429,),
    "sweeper-get": (),
    "access-whoami": (),
    "access-list-principals": (),
    "access-create-principal": (409,),
    "access-get-principal": (404,),
    "access-update-principal": (404,),
    "access-create-api-key": (404,),
    "access-list-api-keys": (),
    "access-revoke-api-key": (404,),
    "audit-list-events": (),
}
UNLISTED_DOMAIN_ERRORS = (404, 409)


def _kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def operation_id(route: APIRoute) -> str:
    """`<tag>-<endpoint>` in lower kebab case (`work-insert`, `connections-connect`), FastAPI's
    generate_unique_id_function. Generated clients name their functions after it; FastAPI's default adds the path
    and method (`insert_v1_work_post`). The tag is not repeated: `operator_command` under `operator` is
    `operator-command`, and an endpoint named as its tag takes its method (`scheduler-get`)."""
    name = _kebab(route.name)
    if not route.tags:
        return name
    tag = _kebab(str(route.tags[0]))
    if name == tag:
        assert route.methods  # an APIRoute without methods given has GET
        name = min(route.methods).lower()
    return f"{tag}-{name.removeprefix(f'{tag}-')}"


def error_statuses(path: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses an operation can answer: by its shape (input, a body, authentication) and by what its
    services raise (DOMAIN_ERRORS)."""
    # A custom method's former path (app.web.custom_methods) answers as the method does.
    operation_id = operation["operationId"].removesuffix("-" + _kebab(FORMER_PATH_SUFFIX))
    statuses = set(DOMAIN_ERRORS.get(operation_id, UNLISTED_DOMAIN_ERRORS))
    if "parameters" in operation or "requestBody" in operation:
        statuses |= {400, 422}  # NUL characters in the URL (app.web.guards), a malformed body; invalid fields
    if "requestBody" in operation:
        statuses.add(413)  # app.web.guards.BodyLimitMiddleware
    if path.startswith(AUTHENTICATED_PREFIX):
        statuses |= {401, 403, 503}  # the key, the role or permit; the key is looked up in Redis and the database
    return sorted(statuses)


def _error_response(status: int) -> dict[str, Any]:
    return {"description": ERROR_DESCRIPTIONS[status], "content": {"application/json": {"schema": {"$ref": f"{COMPONENTS}ErrorBody"}}}}


# FastAPI's own 422, which it declares for every operation with input: its body is not the one this service sends.
_FASTAPI_VALIDATION_ERROR = {"$ref": f"{COMPONENTS}HTTPValidationError"}


def _add_models(components: dict[str, Any], *models: type[BaseModel]) -> None:
    for model in models:
        schema = model.model_json_schema(ref_template=COMPONENTS + "{model}")
        for name, sub_schema in schema.pop("$defs", {}).items():
            components.setdefault(name, sub_schema)
        components[model.__name__] = schema


# What app.web.guards.RejectNulMiddleware refuses in a path or query string, declared on every text parameter.
NO_NUL = "^[^\\x00]*$"


def parameter_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A path, query or header parameter's schema as the service checks it: an optional one is absent, never null (a
    URL or header cannot carry a null, and a generated client would send the text "null"), and text carries no NUL
    unless a pattern of its own already says what it may carry."""
    branches = [branch for branch in schema.get("anyOf", []) if branch.get("type") != "null"]
    if len(branches) == 1 and len(schema["anyOf"]) == 2:
        # Its default (None) goes too: absent means no value, and null is no longer among the values.
        schema = {key: value for key, value in schema.items() if key != "anyOf" and (key, value) != ("default", None)} | branches[0]
    if schema.get("type") == "string" and "pattern" not in schema and "enum" not in schema and "format" not in schema:
        schema = schema | {"pattern": NO_NUL}
    return schema


def closed_key_patterns(node: Any) -> Any:
    """A mapping whose keys follow a pattern (pydantic's `dict[Name, X]`) as the service checks it. Pydantic writes
    `patternProperties`, under which a key that does not match is merely unconstrained; the service refuses it, so
    the pattern goes into `propertyNames` and the value's schema into `additionalProperties`."""
    if isinstance(node, list):
        return [closed_key_patterns(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: closed_key_patterns(value) for key, value in node.items()}
    patterns = node.get("patternProperties", {})
    if len(patterns) == 1 and "additionalProperties" not in node:
        [(pattern, value)] = patterns.items()
        del node["patternProperties"]
        node["propertyNames"] = node.get("propertyNames", {}) | {"pattern": pattern}
        node["additionalProperties"] = value
    return node


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The generated document, completed once per app: error responses, the service definition (the policy route
    reads its body itself, as YAML or JSON) and the bearer scheme."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _add_models(components, ServiceDefinition, ErrorBody)
    schema["components"]["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer wlm_...`"}
    }
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            responses = operation["responses"]
            if responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema") == _FASTAPI_VALIDATION_ERROR:
                del responses["422"]
            for status in error_statuses(path, operation):
                responses.setdefault(str(status), _error_response(status))  # a route's own declaration stands
            if path.startswith(AUTHENTICATED_PREFIX):
                operation["security"] = [{"bearer": []}]
            for parameter in operation.get("parameters", []):
                parameter["schema"] = parameter_schema(parameter["schema"])
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    schema = closed_key_patterns(schema)
    app.openapi_schema = schema
    return schema
