from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


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


class ScalingOut(BaseModel):
    """What an autoscaler reads: `desiredServers` over every node (KEDA's metrics-api `valueLocation`)."""

    application_environment: str
    desiredServers: int  # camel case: the name autoscaler configurations point at
    connectedServers: int
    nodes: list[NodeScaling]
