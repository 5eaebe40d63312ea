from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, Field, model_validator

from app.policy.schemas import ServerLimits


class PeriodPerformance(BaseModel):
    """One service class period in one application environment on one node, over the evaluation window."""

    service_class: str
    period: int
    application_environment: str
    node: str
    importance: int | None
    goal: dict[str, Any]
    window_seconds: float
    evaluated_at: datetime
    ended: int
    ended_per_second: float
    avg_response_ms: float | None
    p50_response_ms: float | None
    p90_response_ms: float | None
    p99_response_ms: float | None
    avg_queue_ms: float | None
    avg_execution_ms: float | None
    velocity: float | None
    # 14 counts: response time as a share of the goal, <=50%, 60%, ... 150%, 200%, 400%, >400%
    distribution: list[int] | None
    performance_index: float | None
    goal_met: bool | None
    goal_met_share: float | None
    queued: int
    # Selects that promoted a request of the class, queued past the promotion time, ahead of the importance order
    # (so far, on this environment and node; on the first period's row). 0 in an evaluation an older version published.
    promoted: int = 0
    # The elected scheduler's delay samples over the window (app/servers/delay_samples.py): how many times the class
    # queue was sampled, and of the requests counted in a state, the share served and the shares waiting per delay
    # cause (the rest waited with none: a worker task was free). None: no request counted (nothing sampled yet, or an
    # evaluation an older version published).
    delay_samples: int = 0
    using_pct: float | None = None
    delay_pct: dict[str, float] | None = None


class ServiceClassPerformance(BaseModel):
    service_class: str
    periods: list[PeriodPerformance]


class ServerInstancesOut(BaseModel):
    """IWMSINF's answer: start `start_more` instances (0 when the environment has what it needs)."""

    application_environment: str
    node: str
    desired_servers: int
    connected_servers: int
    start_more: int
    desired_per_service_class: dict[str, int]


class NodeScaling(BaseModel):
    node: str
    desired_servers: int
    connected_servers: int
    desired_per_service_class: dict[str, int]
    connected_per_service_class: dict[str, int] = Field(
        description="connected servers by the class the manager gave them (a server connected since its last decision has none yet)"
    )


class ScalingOut(BaseModel):
    """What an autoscaler reads: `desiredServers` over every node (KEDA's metrics-api `valueLocation`)."""

    application_environment: str
    desiredServers: int  # camel case: the name autoscaler configurations point at
    connectedServers: int
    nodes: list[NodeScaling]


LimitsSource = Literal["policy", "server", "operator"]


class ServerLimitsIn(ServerLimits):
    """IWM4SLI's AE_SERVERMIN, AE_SERVERMAX and the spread of the minimum over service classes."""

    connect_token: str | None = Field(
        default=None, description="a connected server of the environment sets its limits with its connect token; an operator sends none"
    )

    @model_validator(mode="after")
    def _min_within_max(self) -> Self:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) exceeds max ({self.max})")
        return self

    def limits(self) -> ServerLimits:
        return ServerLimits(min=self.min, max=self.max, spread_min=self.spread_min)


class ServerLimitsOverride(BaseModel):
    """Limits set by IWM4SLI over the policy's (kept in Redis; app/servers/limits.py says how long they hold)."""

    limits: ServerLimits
    policy_limits: ServerLimits = Field(description="the policy's limits when these were set: a policy that changes them ends these")
    source: Literal["server", "operator"]
    set_by: str
    set_at: datetime


class ServerLimitsOut(BaseModel):
    """The server limits an environment runs under, and where they come from."""

    application_environment: str
    min: int
    max: int | None = Field(description="null: no maximum")
    spread_min: bool
    source: LimitsSource = Field(description="`policy`, or who set them by IWM4SLI: a `server` of the environment or an `operator`")
    set_by: str | None = Field(description="the principal that set them; null for the policy's")
    set_at: datetime | None
    policy_limits: ServerLimits = Field(description="the active policy's limits, in force again after a reset or a refresh")
