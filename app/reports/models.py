from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import JSON, CheckConstraint, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow
from spark_jobs.contract.report import WHOLE_DAY_MINUTES


class WorkloadReportRow(Base):
    """One row of the workload activity report: a service class period of one application environment on one
    node, in one interval of one day, under one policy version (whose goal it is measured against).

    Rerunning a date replaces that date's rows (delete and insert in one transaction), so rows never duplicate.
    `report_class` is '' when the requests had none, so that it can be part of the unique key."""

    __tablename__ = "workload_reports"
    __table_args__ = (
        UniqueConstraint(
            "report_date",
            "interval_minutes",
            "interval_start",
            "application_environment",
            "node",
            "service_class",
            "period",
            "report_class",
            "policy_version",
            name="uq_workload_reports_key",
        ),
        CheckConstraint(f"interval_minutes > 0 AND interval_minutes <= {WHOLE_DAY_MINUTES}", name="interval_minutes"),
        CheckConstraint("goal_type IN ('average', 'percentile', 'velocity', 'discretionary')", name="goal_type"),
        CheckConstraint("ended_count >= 0", name="ended_count"),
        Index(None, "report_date", "service_class"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    report_date: Mapped[date]
    interval_start: Mapped[datetime]
    interval_minutes: Mapped[int]  # 15 by default; WHOLE_DAY_MINUTES for the whole-day row
    application_environment: Mapped[str] = mapped_column(String(32))
    node: Mapped[str] = mapped_column(String(32))
    service_class: Mapped[str] = mapped_column(String(32))
    period: Mapped[int]
    report_class: Mapped[str] = mapped_column(String(32))
    policy_version: Mapped[int]
    # The goal of that period in that policy version.
    goal_type: Mapped[str] = mapped_column(String(16))
    goal_ms: Mapped[int | None]
    goal_percentile: Mapped[int | None]
    goal_velocity: Mapped[int | None]
    importance: Mapped[int | None]
    # Requests ended by their server (completed or failed): the response-time figures are theirs.
    ended_count: Mapped[int]
    failed_count: Mapped[int]
    ended_per_s: Mapped[float]
    # Requests that left without their server ending them: deleted, purged at disconnect, abandoned.
    deleted_count: Mapped[int]
    abandoned_count: Mapped[int]
    response_avg_ms: Mapped[float | None]
    response_stddev_ms: Mapped[float | None]
    queue_avg_ms: Mapped[float | None]
    queue_stddev_ms: Mapped[float | None]
    execution_avg_ms: Mapped[float | None]
    execution_stddev_ms: Mapped[float | None]
    response_p50_ms: Mapped[float | None]
    response_p90_ms: Mapped[float | None]
    response_p99_ms: Mapped[float | None]
    # spark_jobs.contract.goals.BUCKET_COUNT counts of response time relative to the goal (<=50, 60, ... 150, 200, 400,
    # >400 %); for a velocity or discretionary goal relative to the average response time.
    buckets: Mapped[list[int]] = mapped_column(JSON)
    execution_velocity: Mapped[float | None]
    performance_index: Mapped[float | None]
    goal_met_share: Mapped[float | None]
    # The class queue's delay samples (spark_jobs/workload_activity/delays.py), null without any: the ticks at which
    # it was sampled, summed, and of the requests counted in a state the percentage served, waiting per delay cause,
    # and waiting with none (unknown). Of the class period on this AE and node, whatever the row's report class.
    delay_samples: Mapped[int | None]
    using_pct: Mapped[float | None]
    delay_environment_state_pct: Mapped[float | None]
    delay_redelivery_pct: Mapped[float | None]
    delay_group_cap_pct: Mapped[float | None]
    delay_no_server_pct: Mapped[float | None]
    delay_servers_starting_pct: Mapped[float | None]
    delay_busy_higher_pct: Mapped[float | None]
    delay_busy_lower_pct: Mapped[float | None]
    unknown_pct: Mapped[float | None]
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)
