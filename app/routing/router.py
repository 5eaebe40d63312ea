from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import Operator, SessionDep, StateDep, Viewer
from app.routing import service
from app.routing.models import NODE_ITSELF
from app.routing.schemas import (
    CandidateOut,
    EliminationOut,
    ExplainOut,
    LinkOut,
    LinkRoutingPatch,
    NodeList,
    NodeOut,
    NodeRoutingPatch,
    StepOut,
)
from app.shared.schemas import Name
from app.web.custom_methods import custom_method

router = APIRouter(prefix="/v1/routing", tags=["routing"])


def _node_out(attributes: service.NodeAttributes) -> NodeOut:
    return NodeOut(
        node=attributes.node,
        link=attributes.link,
        links=[LinkOut(**asdict(link)) for link in attributes.links],
        overridden=dict(attributes.overridden),
        **attributes.routing.model_dump(),
    )


@custom_method(
    router,
    "GET",
    ":explain",
    response_model=ExplainOut,
    summary="Why a request to this environment would go where it goes: the algorithm's steps",
)
async def explain(
    state: StateDep,
    _: Viewer,
    application_environment: Annotated[Name, Query(description="the environment a hypothetical request is for")],
    queue_manager_node: Annotated[
        Name | None, Query(description="the node of the queue manager inserting it (none: no local instance)")
    ] = None,
) -> ExplainOut:
    policy = await state.policies.knowing(application_environment)
    policy.environment(application_environment)  # 404 for an environment the policy does not define
    decision, candidates = await state.router.decide(policy, application_environment, queue_manager_node)
    return ExplainOut(
        application_environment=application_environment,
        queue_manager_node=queue_manager_node,
        chosen=decision.chosen,
        link=decision.link,
        reason=decision.reason,
        candidates=[CandidateOut(**asdict(c)) for c in candidates],
        steps=[
            StepOut(step=s.step, rule=s.rule, eliminated=[EliminationOut(**asdict(e)) for e in s.eliminated], remaining=list(s.remaining))
            for s in decision.steps
        ],
    )


@router.get("/nodes", response_model=NodeList, summary="Each node's routing attributes (policy and operators' changes) and link state")
async def list_nodes(state: StateDep, _: Viewer) -> NodeList:
    return NodeList(items=[_node_out(n) for n in await service.nodes(state.router, await state.policies.active())])


@router.patch("/nodes/{node}", response_model=NodeOut, summary="Alter, suspend or resume a node; stop or start its link")
async def alter_node(node: Name, body: NodeRoutingPatch, session: SessionDep, state: StateDep, operator: Operator) -> NodeOut:
    policy = await state.policies.active()
    await service.alter(session, state.router.store, policy, operator.name, node, NODE_ITSELF, body.model_dump(exclude_unset=True))
    return _node_out(next(n for n in await service.nodes(state.router, policy) if n.node == node))


@router.patch("/nodes/{node}/links/{link}", response_model=NodeOut, summary="Alter one of a node's links (NETPRTY); stop or start it")
async def alter_link(node: Name, link: Name, body: LinkRoutingPatch, session: SessionDep, state: StateDep, operator: Operator) -> NodeOut:
    policy = await state.policies.active()
    changes = body.model_dump(exclude_unset=True)
    await service.alter(session, state.router.store, policy, operator.name, node, NODE_ITSELF, changes, link=link)
    return _node_out(next(n for n in await service.nodes(state.router, policy) if n.node == node))
