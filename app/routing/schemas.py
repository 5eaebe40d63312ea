from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.policy.schemas import (
    InstanceUseQueue,
    MostRecentlyUsedCap,
    NetworkPriority,
    NodeRouting,
    NodeUseQueue,
    Rank,
    RoutingPriority,
    Weight,
)
from app.routing.algorithm import LinkState, UseQueue
from app.shared.schemas import Name, StrictModel

# The service refuses a change that names no attribute (a null names one: back to the policy's value); declared so.
NAMES_A_CHANGE = ConfigDict(json_schema_extra={"minProperties": 1})


class NodeRoutingPatch(StrictModel):
    """ALTER, SUSPEND and RESUME of a node, STOP and START of its link: the attributes named change, a null takes one
    back to the policy's value."""

    model_config = NAMES_A_CHANGE

    use_queue: NodeUseQueue | None = None
    weight: Weight | None = None
    network_priority: NetworkPriority | None = None
    rank: Rank | None = None
    most_recently_used: MostRecentlyUsedCap | None = None
    suspended: StrictBool | None = None
    link_stopped: StrictBool | None = Field(
        default=None, description="true: STOP its links (the node gets no routed work while another can); false or null: START them"
    )


class LinkRoutingPatch(StrictModel):
    """ALTER, STOP and START of one of a node's links: the attributes named change, a null takes one back to the
    policy's value."""

    model_config = NAMES_A_CHANGE

    network_priority: NetworkPriority | None = None
    stopped: StrictBool | None = Field(
        default=None, description="true: STOP this link (the node is reached by its others); false or null: START it"
    )


class InstanceRoutingPatch(StrictModel):
    model_config = NAMES_A_CHANGE

    put_enabled: StrictBool | None = None
    rank: Rank | None = None
    priority: RoutingPriority | None = None
    use_queue: InstanceUseQueue | None = None


class LinkOut(BaseModel):
    name: str
    network_priority: int
    state: LinkState


class NodeOut(NodeRouting):
    node: str
    link: LinkState = Field(description="the state of its best link")
    links: list[LinkOut]
    overridden: dict[str, Any] = Field(description="what operators changed at run time, over the policy")


class NodeList(BaseModel):
    items: list[NodeOut]


class CandidateOut(BaseModel):
    node: str
    put_enabled: bool
    rank: int
    priority: int
    use_queue: UseQueue
    link_rank: int
    suspended: bool
    links: list[LinkOut]
    weight: int
    sequence_factor: float
    sequence_number: int


class EliminationOut(BaseModel):
    node: str
    reason: str
    link: str | None = Field(description="the link eliminated, while the node stays; null: the node is eliminated")


class StepOut(BaseModel):
    step: str = Field(description="the step's number in IBM MQ's cluster workload algorithm (docs/routing.md)")
    rule: str
    eliminated: list[EliminationOut]
    remaining: list[str]


class ExplainOut(BaseModel):
    application_environment: str
    queue_manager_node: Name | None
    chosen: str | None
    link: str | None = Field(description="the link the chosen node is reached by (null: none chosen, or the local instance)")
    reason: str
    candidates: list[CandidateOut]
    steps: list[StepOut]
