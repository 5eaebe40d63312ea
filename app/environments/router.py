from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.deps import AnyPrincipal, Operator, QueueManager, SessionDep, StateDep, Viewer, check_operator
from app.environments import service
from app.environments.schemas import (
    ApplicationEnvironmentList,
    ApplicationEnvironmentOut,
    DynamicApplicationEnvironmentIn,
    DynamicApplicationEnvironmentOut,
    InstanceOut,
    InstanceRoutingPatch,
    ServerLimitsIn,
    ServerLimitsOut,
)
from app.shared.schemas import Name

router = APIRouter(prefix="/v1", tags=["application environments"])

# The operation ids these operations had when the operator, servers and routing routers served them: generated
# clients name their functions after them (app.openapi.operation_id would derive new ones from the tag).
DISPLAY_ALL_ID = "operator-display-application-environments"
DISPLAY_ONE_ID = "operator-display-application-environment"
SET_LIMITS_ID = "goals-and-servers-set-server-limits"
LIMITS_ID = "goals-and-servers-server-limits"
RESET_LIMITS_ID = "goals-and-servers-reset-server-limits"
ALTER_INSTANCE_ID = "routing-alter-instance"

NamePattern = Annotated[
    str,
    Query(
        min_length=1, max_length=32, pattern=r"^[A-Za-z0-9$#@_.*-]+$", description="a name, or a pattern with `*` for any run of characters"
    ),
]


@router.post(
    "/application-environments",
    status_code=201,
    response_model=DynamicApplicationEnvironmentOut,
    responses={200: {"model": DynamicApplicationEnvironmentOut, "description": "defined already, the same way"}},
    summary="IWM4AEDF: a queue manager defines a dynamic application environment, removed when it disconnects",
)
async def define_dynamic_environment(
    body: DynamicApplicationEnvironmentIn,
    response: Response,
    session: SessionDep,
    state: StateDep,
    queue_manager: QueueManager,
) -> DynamicApplicationEnvironmentOut:
    defined, created = await service.define_dynamic(
        session,
        state.policies,
        queue_manager,
        body,
        most_per_queue_manager=state.settings.max_dynamic_environments,
        longest_completion_ms=state.settings.longest_completion_ms,
    )
    if not created:
        response.status_code = 200
    return defined


@router.get(
    "/application-environments",
    response_model=ApplicationEnvironmentList,
    summary="D WLM,APPLENV=pattern: state, servers, in-flight and queued work of each application environment",
    operation_id=DISPLAY_ALL_ID,
)
async def display_application_environments(
    state: StateDep,
    _: Viewer,
    name: NamePattern = "*",
    dynamic: Annotated[bool, Query(description="the dynamic ones queue managers defined (D WLM,DYNAPPL=pattern)")] = False,
) -> ApplicationEnvironmentList:
    return await service.display(state.queues, state.operator, await state.policies.current(), name, dynamic=dynamic)


@router.get(
    "/application-environments/{name}",
    response_model=ApplicationEnvironmentOut,
    summary="D WLM,APPLENV=name: one application environment",
    operation_id=DISPLAY_ONE_ID,
)
async def display_application_environment(name: str, state: StateDep, _: Viewer) -> ApplicationEnvironmentOut:
    return await service.describe(state.queues, state.operator, await state.policies.current(), name)


@router.put(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="IWM4SLI: set an environment's server limits (a connected server of it, with its connect token, or an operator)",
    description="`min` may not exceed `max`: 422 `validation_failed` (a comparison of two fields, which a schema cannot state).",
    operation_id=SET_LIMITS_ID,
)
async def set_server_limits(
    name: str, body: ServerLimitsIn, session: SessionDep, state: StateDep, principal: AnyPrincipal
) -> ServerLimitsOut:
    policy = await state.policies.knowing(name.upper())
    if body.connect_token is None:
        check_operator(principal)
    return await service.set_server_limits(session, state.sessions, state.queues, state.connection_cache, policy, principal, name, body)


@router.get(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="The server limits an environment runs under: the policy's, or those set by IWM4SLI",
    operation_id=LIMITS_ID,
)
async def server_limits(name: str, state: StateDep, _: Viewer) -> ServerLimitsOut:
    return await service.server_limits(state.queues, await state.policies.active(), name)


@router.delete(
    "/application-environments/{name}/server-limits",
    response_model=ServerLimitsOut,
    summary="Reset an environment's server limits to the policy's",
    operation_id=RESET_LIMITS_ID,
)
async def reset_server_limits(name: str, session: SessionDep, state: StateDep, operator: Operator) -> ServerLimitsOut:
    return await service.reset_server_limits(session, state.queues, await state.policies.active(), operator, name)


@router.patch(
    "/routing/application-environments/{application_environment}/instances/{node}",
    response_model=InstanceOut,
    summary="Alter an environment's instance on a node (put enabled, rank, priority, use-queue)",
    operation_id=ALTER_INSTANCE_ID,
)
async def alter_instance(
    application_environment: Name, node: Name, body: InstanceRoutingPatch, session: SessionDep, state: StateDep, operator: Operator
) -> InstanceOut:
    policy = await state.policies.knowing(application_environment)
    changes = body.model_dump(exclude_unset=True)
    return await service.alter_instance(session, state.router.store, policy, operator, application_environment, node, changes)
