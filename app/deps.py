"""FastAPI dependencies: the process state, the advisory streams, the database session, the caller and role checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.roles import PrincipalInfo, Role
from app.auth.service import authenticate
from app.errors import Forbidden, Unauthenticated
from app.events.service import EventStreams
from app.state import AppState
from app.work.lifecycle_services import WorkCall


async def get_state(request: Request) -> AppState:
    return request.app.state.wlm


StateDep = Annotated[AppState, Depends(get_state)]


async def get_event_streams(state: StateDep) -> EventStreams:
    return state.events


EventStreamsDep = Annotated[EventStreams, Depends(get_event_streams)]


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
QueueManager = Annotated[PrincipalInfo, Depends(require(Role.QUEUE_MANAGER))]
# Connects, heartbeats: a queue manager or a server.
Connector = Annotated[PrincipalInfo, Depends(require(Role.QUEUE_MANAGER, Role.SERVER))]
# Disconnects: a queue manager or a server its own connection, an admin any.
Participant = Annotated[PrincipalInfo, Depends(require(Role.QUEUE_MANAGER, Role.SERVER, Role.ADMIN))]
# Asks how the policy classifies work: who reads the policy, or who queues work.
Classifier = Annotated[PrincipalInfo, Depends(require(Role.VIEWER, Role.QUEUE_MANAGER))]
_OPERATOR = frozenset({Role.OPERATOR})


def check_operator(principal: PrincipalInfo) -> PrincipalInfo:
    """For a route that needs the operator role only in some of its calls (decided by the body)."""
    return check_roles(principal, _OPERATOR)


def _work_call(role: Role) -> Callable[[Request], Coroutine[Any, Any, WorkCall]]:
    allowed = frozenset({role})

    async def work_call(request: Request) -> WorkCall:  # one dependency, no nested ones: these routes are the hot path
        principal = check_roles(await principal_of(request), allowed)
        state: AppState = request.app.state.wlm
        return WorkCall(state.work, principal)

    return work_call


async def any_work(request: Request) -> WorkCall:
    """The work services and a caller of any role: the service decides (a request's status: its queue manager's
    principal, or an operator)."""
    state: AppState = request.app.state.wlm
    return WorkCall(state.work, await principal_of(request))


# The work services and the caller, checked for the role the route needs (one dependency, one check).
queue_manager_work = _work_call(Role.QUEUE_MANAGER)
server_work = _work_call(Role.SERVER)
QueueManagerWork = Annotated[WorkCall, Depends(queue_manager_work)]
ServerWork = Annotated[WorkCall, Depends(server_work)]
AnyWork = Annotated[WorkCall, Depends(any_work)]
