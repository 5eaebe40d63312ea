from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

STATES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")


class WhatIfRun(Base):
    """One what-if run: what was asked (day, candidate, environment, seed, by whom), where it is, and its result.

    Kept in the database rather than Redis: a result (a day's figures per class period and interval, predicted and
    recorded) runs to megabytes and is kept for days, any replica answers for it, and a run changes state a few
    times in its minutes: nothing Redis' memory or speed is needed for."""

    __tablename__ = "what_if_runs"
    __table_args__ = (
        CheckConstraint(f"state IN ({', '.join(repr(state) for state in STATES)})", name="state"),
        Index(None, "state", "id"),
        # One run at a time, whichever process claims it: a second claim fails here.
        Index(
            "uq_what_if_runs_one_running",
            "state",
            unique=True,
            sqlite_where=text("state = 'running'"),
            postgresql_where=text("state = 'running'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    run_date: Mapped[date]
    application_environment: Mapped[str | None] = mapped_column(String(32))
    seed: Mapped[int]
    # The candidate as the policy install checked it (its plain data).
    candidate: Mapped[dict[str, Any]] = mapped_column(JSON)
    requested_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # The job's last stage line, while it runs.
    progress: Mapped[str | None] = mapped_column(String(500))
    # Where it runs: only that host can tell whether it is alive, and end it. The service process that claimed it,
    # and its job's process (the leader of the job's process group) once started.
    host: Mapped[str | None] = mapped_column(String(255))
    claimed_by: Mapped[int | None]
    pid: Mapped[int | None]
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(String(2000))
