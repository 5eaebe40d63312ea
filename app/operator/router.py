from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from pydantic import TypeAdapter

from app.deps import Offset, Operator, SessionDep, StateDep, Viewer
from app.errors import BadRequest, PayloadTooLarge
from app.operator import display, service
from app.operator.commands import DisplayCommand, VaryBody
from app.operator.schemas import ApplicationEnvironmentList, OperatorCommandList, VaryOut

router = APIRouter(prefix="/v1", tags=["operator"])

# A command is at most a few hundred characters; a body far beyond that is not one.
MAX_COMMAND_BODY_BYTES = 4096


def _inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """The body schema with its `$defs` put in place of their references: the OpenAPI document has no `$defs`."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref", "")
            if reference.startswith("#/$defs/"):
                return resolve(definitions[reference.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)


# The body is read by service.parse_operator_command rather than as a FastAPI parameter (see parse_vary_body), so it
# is declared here for the OpenAPI document.
_COMMAND_BODY = {
    "requestBody": {
        "required": True,
        "description": 'The text form `{"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"}` (case-insensitive; `V`, `Q`, `DYNAPPL=` '
        "accepted; a `DISPLAY WLM,APPLENV=pattern` text is answered like GET /v1/application-environments) or the structured "
        'form `{"action": "QUIESCE", "application_environment": "PAYROLL", "dynamic": false}`.',
        "content": {"application/json": {"schema": _inline_definitions(TypeAdapter(VaryBody).json_schema())}},
    }
}


def _json_body(raw: bytes) -> Any:
    if len(raw) > MAX_COMMAND_BODY_BYTES:
        raise PayloadTooLarge(f"an operator command body may have at most {MAX_COMMAND_BODY_BYTES} bytes")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}", code="malformed_json") from exc


@router.post(
    "/operator/commands",
    response_model=VaryOut | ApplicationEnvironmentList,
    openapi_extra=_COMMAND_BODY,
    summary="VARY WLM,APPLENV=name,QUIESCE|RESUME|REFRESH (and DISPLAY WLM,APPLENV=pattern)",
)
async def operator_command(
    request: Request, session: SessionDep, state: StateDep, operator: Operator
) -> VaryOut | ApplicationEnvironmentList:
    command = service.parse_operator_command(_json_body(await request.body()))
    if isinstance(command, DisplayCommand):
        return await display.display(state.queues, state.operator, await state.policies.current(), command)
    policy = await state.policies.knowing(command.application_environment)
    result = await service.vary(session, state.operator, state.queues, policy, operator.name, command)
    return VaryOut(
        command=str(result.command),
        application_environment=result.command.application_environment,
        dynamic=result.command.dynamic,
        previous_state=result.previous_state,
        state=result.state,
        changed_at=result.changed_at,
        changed_by=result.changed_by,
    )


@router.get("/operator/commands", response_model=OperatorCommandList, summary="VARY commands, accepted and refused, newest first")
async def list_commands(
    session: SessionDep,
    _: Viewer,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> OperatorCommandList:
    return await service.list_commands(session, limit, offset)
