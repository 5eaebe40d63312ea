"""FastAPI dependencies: the process state, the database session, the caller and role checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.roles import PrincipalInfo, Role
from app.auth.service import authenticate
from app.errors import Forbidden, Unauthenticated
from app.state import AppState


async def get_state(request: Request) -> AppState:
    return request.app.state.wlm  # type: ignore[no-any-return]


StateDep = Annotated[AppState, Depends(get_state)]


async def get_session(state: StateDep) -> AsyncIterator[AsyncSession]:
    async with state.sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]

# The paging offset of list endpoints. Bounded because the databases take OFFSET as a 64-bit integer at most: a
# larger one was a database error (500) instead of the client's 422; no list comes near this length.
MAX_OFFSET = 2**31 - 1
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]


# Authentication reads the header itself rather than through FastAPI's HTTPBearer and nested dependencies:
# it runs on every call, and dependency resolution was a large share of a request's cost. The bearer scheme
# is declared in the OpenAPI document by app.main.
async def principal_of(request: Request) -> PrincipalInfo:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthenticated("send an API key as 'Authorization: Bearer <key>'", code="missing_api_key")
    state: AppState = request.app.state.wlm
    return await authenticate(state.sessions, key.strip(), state.key_cache)


def check_roles(principal: PrincipalInfo, allowed: frozenset[Role]) -> PrincipalInfo:
    if not principal.has_any(allowed):
        raise Forbidden(
            f"this needs the role {' or '.join(sorted(allowed))}; {principal.name} has {', '.join(sorted(principal.roles)) or 'none'}",
            code="missing_role",
            required_roles=sorted(allowed),
        )
    return principal


def require(*roles: Role) -> Callable[..., Coroutine[Any, Any, PrincipalInfo]]:
    """A dependency that lets the caller through if it holds any of `roles` (admin implies operator and viewer)."""
    allowed = frozenset(roles)

    async def check(request: Request) -> PrincipalInfo:
        return check_roles(await principal_of(request), allowed)

    return check


Admin = Annotated[PrincipalInfo, Depends(require(Role.ADMIN))]
Operator = Annotated[PrincipalInfo, Depends(require(Role.OPERATOR))]
Viewer = Annotated[PrincipalInfo, Depends(require(Role.VIEWER))]
AnyPrincipal = Annotated[PrincipalInfo, Depends(principal_of)]
