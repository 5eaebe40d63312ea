from __future__ import annotations

from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Path, Query, Request, Response

from app.deps import Admin, Classifier, Offset, SessionDep, StateDep, Viewer
from app.policy import service
from app.policy.models import PolicyVersion
from app.policy.schemas import (
    ClassifyIn,
    ClassifyOut,
    PolicyInstallOut,
    PolicyOut,
    PolicyVersionList,
    PolicyVersionOut,
)
from app.web.custom_methods import custom_method

router = APIRouter(prefix="/v1/policy", tags=["policy"])

_DEFINITION_BODY = {
    "requestBody": {
        "required": True,
        "description": "A service definition as YAML or JSON (see examples/policy.yaml in the repository).",
        "content": {
            media: {"schema": {"$ref": "#/components/schemas/ServiceDefinition"}} for media in ("application/yaml", "application/json")
        },
    }
}
_YAML_TOO: dict[int | str, dict[str, Any]] = {200: {"content": {"application/yaml": {}}}}


def _version_out(row: PolicyVersion) -> PolicyVersionOut:
    return PolicyVersionOut.model_validate(row, from_attributes=True)


def _policy_response(request: Request, row: PolicyVersion) -> PolicyOut | Response:
    if "yaml" in request.headers.get("accept", ""):
        return Response(yaml.safe_dump(row.definition, sort_keys=False), media_type="application/yaml")
    return PolicyOut(**_version_out(row).model_dump(), definition=row.definition)


@router.put(
    "",
    response_model=PolicyInstallOut,
    openapi_extra=_DEFINITION_BODY,
    summary="Install and activate a service definition",
    description=(
        "Checked as the schema says, then as a whole: names unique, each name referred to defined, no minimum above "
        "its maximum, the order of a service class's periods (a duration for each but the last, a discretionary goal "
        "only last), completion times within the tombstones' bound. Each problem is an entry of a 422 "
        "`validation_failed` with its path; a body that is not one YAML or JSON document is 400 `malformed_document`."
    ),
)
async def install_policy(
    request: Request,
    session: SessionDep,
    state: StateDep,
    admin: Admin,
    dry_run: Annotated[bool, Query(description="validate only; nothing is installed")] = False,
) -> PolicyInstallOut:
    # Its size is bounded by the body limits (app.main): max_policy_bytes.
    body = await request.body()
    row, changed = await service.install(
        session,
        state.policies,
        state.queues,
        admin.name,
        body,
        request.headers.get("content-type"),
        dry_run=dry_run,
        longest_completion_ms=state.settings.longest_completion_ms,
    )
    return PolicyInstallOut(**_version_out(row).model_dump(), changed=changed, dry_run=dry_run)


@router.get("", response_model=PolicyOut, responses=_YAML_TOO, summary="The active service definition")
async def get_policy(request: Request, session: SessionDep, _: Viewer) -> PolicyOut | Response:
    return _policy_response(request, await service.active_version(session))


@router.get("/versions", response_model=PolicyVersionList, summary="Installed versions, newest first")
async def list_versions(
    session: SessionDep,
    _: Viewer,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Offset = 0,
) -> PolicyVersionList:
    rows, total = await service.list_versions(session, limit, offset)
    return PolicyVersionList(items=[_version_out(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/versions/{version}", response_model=PolicyOut, responses=_YAML_TOO, summary="One installed version")
async def get_version(
    request: Request, version: Annotated[int, Path(ge=1, le=2**31 - 1)], session: SessionDep, _: Viewer
) -> PolicyOut | Response:
    return _policy_response(request, await service.get_version(session, version))


@custom_method(router, "POST", ":classify", response_model=ClassifyOut, summary="Which classes the active policy gives such work")
async def classify(
    body: ClassifyIn,
    session: SessionDep,
    state: StateDep,
    _: Classifier,
) -> ClassifyOut:
    policy = await state.policies.active()
    result = policy.classify(body.subsystem_type, service.qualifier_attributes(body.attributes, path="attributes"))
    return ClassifyOut(
        policy_version=policy.version,
        service_class=result.service_class,
        report_class=result.report_class,
        matched_rules=list(result.matched_rules),
    )
