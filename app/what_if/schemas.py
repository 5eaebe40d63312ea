from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.shared.schemas import INTEGRAL, IsoDate, Name, StrictModel


class WhatIfIn(StrictModel):
    date: IsoDate
    policy: str | dict[str, Any] = Field(
        description="the candidate service definition: YAML or JSON text, or the definition itself; within the policy "
        "install's size limit (WLM_MAX_POLICY_BYTES)"
    )
    environment: Name | None = Field(default=None, description="replay only this application environment")
    seed: Annotated[int, Field(strict=True, ge=0, le=2**31 - 1), INTEGRAL] = 0


class WhatIfDates(BaseModel):
    items: list[date] = Field(description="the days that have work records to replay, newest first")


class WhatIfAccepted(BaseModel):
    id: int


class WhatIfOut(BaseModel):
    id: int
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    date: date
    environment: str | None
    seed: int
    requested_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: str | None = Field(description="the job's last stage, while it runs")
    error: str | None = Field(description="why it failed")
    result: dict[str, Any] | None = Field(
        description="when done: per environment, per class period and interval (15 minutes) and for the day, the predicted "
        "and the recorded figures (PI, percentiles, the 14 buckets, servers wanted and connected, server-seconds), a "
        "summary per class period (each side's whole-day PI, servers and server-seconds, and attainment) with `falls` "
        "where the candidate's goal attainment is below the recorded day's, and the assumptions where the records say "
        "nothing"
    )
