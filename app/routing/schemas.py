from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.policy.schemas import Rank, RoutingPriority
from app.routing.algorithm import LinkState, UseQueue
from app.schemas import Name, StrictModel


class NodeRoutingPatch(StrictModel):
    """ALTER, SUSPEND and RESUME of a node, STOP and START of its link: the attributes named change, a null takes one
    back to the policy's value."""

    use_queue: Literal["LOCAL", "ANY"] | None = None
    weight: Annotated[int, Field(ge=1, le=99)] | None = None
    network_priority: Annotated[int, Field(ge=0, le=9)] | None = None
    rank: Rank | None = None
    most_recently_used: Annotated[int, Field(ge=1, le=999_999_999)] | None = None
    suspended: bool | None = None
    link_stopped: bool | None = Field(default=None, description="true: STOP the link (the node gets no routed work while another can); false or null: START it")


class InstanceRoutingPatch(StrictModel):
    put_enabled: bool | None = None
    rank: Rank | None = None
    priority: RoutingPriority | None = None
    use_queue: Literal["LOCAL", "ANY", "QMGR"] | None = None


class NodeOut(BaseModel):
    node: str
    use_queue: str
    weight: int
    network_priority: int
    rank: int
    most_recently_used: int
    suspended: bool
    link: LinkState
    overridden: dict[str, Any] = Field(description="what operators changed at run time, over the policy")


class NodeList(BaseModel):
    items: list[NodeOut]


class InstanceOut(BaseModel):
    node: str
    application_environment: str
    overridden: dict[str, Any]


class CandidateOut(BaseModel):
    node: str
    put_enabled: bool
    rank: int
    priority: int
    use_queue: UseQueue
    link_rank: int
    suspended: bool
    link: LinkState
    network_priority: int
    weight: int
    sequence_factor: float
    sequence_number: int


class EliminationOut(BaseModel):
    node: str
    reason: str


class StepOut(BaseModel):
    step: str = Field(description="the step's number in the seed's algorithm")
    rule: str
    eliminated: list[EliminationOut]
    remaining: list[str]


class ExplainOut(BaseModel):
    application_environment: str
    queue_manager_node: Name | None
    chosen: str | None
    reason: str
    candidates: list[CandidateOut]
    steps: list[StepOut]
