from __future__ import annotations

from fastapi import APIRouter

from app.auth import service
from app.auth.models import ApiKey, Principal
from app.auth.roles import Role
from app.auth.schemas import (
    ApiKeyCreated,
    ApiKeyIn,
    ApiKeyList,
    ApiKeyOut,
    PrincipalIn,
    PrincipalList,
    PrincipalOut,
    PrincipalUpdate,
    WhoAmI,
)
from app.deps import Admin, AnyPrincipal, SessionDep, StateDep

router = APIRouter(prefix="/v1", tags=["access"])


def _principal_out(principal: Principal) -> PrincipalOut:
    return PrincipalOut(
        name=principal.name,
        description=principal.description,
        roles=[Role(name) for name in principal.roles],
        permits=[p.profile for p in principal.permits],
        created_at=principal.created_at,
        created_by=principal.created_by,
    )


def _key_out(api_key: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=api_key.id,
        principal=api_key.principal.name,
        description=api_key.description,
        created_at=api_key.created_at,
        created_by=api_key.created_by,
        expires_at=api_key.expires_at,
        revoked_at=api_key.revoked_at,
    )


@router.get("/whoami", response_model=WhoAmI, summary="The caller as its API key identifies it")
async def whoami(principal: AnyPrincipal) -> WhoAmI:
    return WhoAmI(principal=principal.name, roles=sorted(principal.roles), permits=list(principal.permits), key_id=principal.key_id)


@router.post("/principals", status_code=201, response_model=PrincipalOut, summary="Create a principal with roles and permits")
async def create_principal(body: PrincipalIn, session: SessionDep, admin: Admin) -> PrincipalOut:
    return _principal_out(await service.create_principal(session, admin.name, body))


@router.get("/principals", response_model=PrincipalList)
async def list_principals(session: SessionDep, _: Admin) -> PrincipalList:
    return PrincipalList(items=[_principal_out(p) for p in await service.list_principals(session)])


@router.get("/principals/{name}", response_model=PrincipalOut)
async def get_principal(name: str, session: SessionDep, _: Admin) -> PrincipalOut:
    return _principal_out(await service.get_principal(session, name))


@router.patch("/principals/{name}", response_model=PrincipalOut, summary="Change roles, permits or description")
async def update_principal(name: str, body: PrincipalUpdate, session: SessionDep, state: StateDep, admin: Admin) -> PrincipalOut:
    return _principal_out(await service.update_principal(session, admin.name, name, body, state.key_cache))


@router.post(
    "/api-keys",
    status_code=201,
    response_model=ApiKeyCreated,
    summary="Create an API key (shown once)",
    description="`expires_at`, when given, must be in the future: 422 `validation_failed` at `expires_at` (a rule of the clock).",
)
async def create_api_key(body: ApiKeyIn, session: SessionDep, admin: Admin) -> ApiKeyCreated:
    api_key, key = await service.create_api_key(session, admin.name, body)
    return ApiKeyCreated(**_key_out(api_key).model_dump(), key=key)


@router.get("/api-keys", response_model=ApiKeyList)
async def list_api_keys(session: SessionDep, _: Admin, principal: str | None = None) -> ApiKeyList:
    return ApiKeyList(items=[_key_out(k) for k in await service.list_api_keys(session, principal)])


@router.delete("/api-keys/{key_id}", response_model=ApiKeyOut, summary="Revoke an API key")
async def revoke_api_key(key_id: str, session: SessionDep, state: StateDep, admin: Admin) -> ApiKeyOut:
    return _key_out(await service.revoke_api_key(session, admin.name, key_id, state.key_cache))
