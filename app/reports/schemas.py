from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from spark_jobs.contract.goals import BUCKET_LABELS


def _none_if_empty(value: str | None) -> str | None:
    return value or None


class WorkloadReportRowOut(BaseModel):
    """One row of the workload activity report: a service class period of one application environment on one node,
    in one interval of one day, measured against the goal of the policy version active when its requests ended."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    report_date: date
    interval_start: datetime
    interval_minutes: int = Field(description="the interval's length: 15 by default, 1440 for the whole-day row")
    application_environment: str
    node: str
    service_class: str
    period: int
    # Stored as '' (it is part of the table's unique key); shown as null.
    report_class: Annotated[str | None, BeforeValidator(_none_if_empty)] = Field(description="null when the requests had none")
    policy_version: int
    goal_type: Literal["average", "percentile", "velocity", "discretionary"]
    goal_ms: int | None
    goal_percentile: int | None
    goal_velocity: int | None
    importance: int | None
    ended_count: int = Field(description="requests ended by their server (completed or failed)")
    failed_count: int
    ended_per_s: float
    deleted_count: int = Field(description="requests deleted or purged while queued")
    abandoned_count: int = Field(description="requests given up after their last delivery")
    response_avg_ms: float | None
    response_stddev_ms: float | None
    queue_avg_ms: float | None
    queue_stddev_ms: float | None
    execution_avg_ms: float | None
    execution_stddev_ms: float | None
    response_p50_ms: float | None
    response_p90_ms: float | None
    response_p99_ms: float | None
    buckets: list[int] = Field(
        description="14 counts of response time relative to the goal (velocity and discretionary: to the average), "
        "labelled by `bucket_labels`"
    )
    execution_velocity: float | None
    performance_index: float | None = Field(description="<= 1: the goal was met; null when nothing ended")
    goal_met_share: float | None
    delay_samples: int | None = Field(
        description="times the class queue was sampled in the interval (fewer over a scheduler failover's gap); null: none"
    )
    using_pct: float | None = Field(description="of the requests counted in a state, the percentage served; null: none counted")
    delay_environment_state_pct: float | None = Field(description="waiting: the environment quiesced, stopped or refreshing")
    delay_redelivery_pct: float | None = Field(description="waiting to be delivered again after a failed delivery")
    delay_group_cap_pct: float | None = Field(description="waiting: the resource group at its cap")
    delay_no_server_pct: float | None = Field(description="waiting: no server of the environment connected")
    delay_servers_starting_pct: float | None = Field(description="waiting for wanted servers to connect")
    delay_busy_higher_pct: float | None = Field(description="waiting: servers busy with work of equal or higher importance")
    delay_busy_lower_pct: float | None = Field(description="waiting: servers busy with lower-importance work")
    unknown_pct: float | None = Field(description="waiting with no delay cause (a worker task free)")
    computed_at: datetime


BucketLabels = Annotated[list[str], Field(description="the labels of the 14 `buckets`, in percent of the goal")]


class WorkloadReportPage(BaseModel):
    items: list[WorkloadReportRowOut]
    bucket_labels: BucketLabels = list(BUCKET_LABELS)
    total: int = Field(description="rows matching the filters, over every page")
    limit: int
    offset: int
    next: str | None = Field(description="the path and query of the next page; null on the last")


class ServiceClassPeriodDay(BaseModel):
    """A service class period of one environment on one node over one day (per report class and policy version, as
    the report keeps them apart): the whole-day figures and how its intervals went."""

    application_environment: str
    node: str
    service_class: str
    period: int
    report_class: str | None
    policy_version: int
    whole_day: WorkloadReportRowOut | None = Field(description="the whole-day row (interval 1440); null if the report has none")
    intervals: int = Field(description="intervals with a row (a row exists where requests ended, left or waited)")
    intervals_missed: int = Field(description="intervals whose PI was above 1 (goal missed)")
    worst_interval_start: datetime | None = Field(description="the interval with the highest PI (the earliest of equals)")
    worst_interval_pi: float | None


class WorkloadSummary(BaseModel):
    date: date
    interval_minutes: int = Field(description="the length of the intervals counted in `intervals`")
    bucket_labels: BucketLabels = list(BUCKET_LABELS)
    items: list[ServiceClassPeriodDay] = Field(description="ordered by application environment, node, service class, period")


class ReportDates(BaseModel):
    items: list[date] = Field(description="dates with a report, newest first")
