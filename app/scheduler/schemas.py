from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class MemberOut(BaseModel):
    member: str
    weight: int
    seen_ms_ago: int = Field(description="since its last heartbeat, by Redis's clock")
    live: bool = Field(description="heard from within the activation interval")
    host: str | None = None
    pid: int | None = None


class SchedulerOut(BaseModel):
    holder: str | None = Field(description="the member holding the scheduler's role, if any")
    epoch: int = Field(description="the fencing token: grows by one with every new holder")
    weight: int | None
    since: datetime | None
    renewed: datetime | None
    this_process: str | None = Field(description="this replica's member name (null: it runs no duties)")
    activation_interval_s: float
    heartbeat_interval_s: float
    members: list[MemberOut]
