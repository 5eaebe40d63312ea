"""What-if runs: asked for (the candidate checked as the policy install checks it, the day's records and Spark there,
all before any Spark work), read, cancelled, and forgotten after WLM_WHATIF_RETENTION_DAYS."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from datetime import date, timedelta

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db import utcnow
from app.errors import Conflict, NotFound, ServiceUnavailable
from app.policy.service import checked_candidate
from app.what_if.models import FINISHED, WhatIfRun
from app.what_if.runner import GONE, WhatIfRunner
from app.what_if.schemas import WhatIfIn, WhatIfOut
from spark_jobs.common.java_home import choose_java_home, java_home_on_path
from spark_jobs.what_if.arguments import day_has_records, recorded_days


def spark_unavailable(settings: Settings) -> str | None:
    """Why the job cannot run here (blocking: it looks at the file system); None when it can: the service's `report`
    extra (PySpark) installed, and a Java to run its driver on."""
    if importlib.util.find_spec("pyspark") is None:
        return "PySpark, the service's `report` extra, is not installed where the service runs"
    home = choose_java_home(settings.spark_java_home, os.environ) or java_home_on_path()
    if home is None or not (home / "bin" / "java").is_file():
        return f"no Java to run Spark's driver on ({home or 'none found'}): set WLM_SPARK_JAVA_HOME or JAVA_HOME"
    return None


async def days(settings: Settings, limit: int) -> list[date]:
    """The days a run can replay: those with records (none listed where the records are not on a local disk)."""
    return await asyncio.to_thread(recorded_days, str(settings.records_dir.resolve()), limit)


def _document(policy: str | dict[str, object]) -> tuple[bytes, str]:
    if isinstance(policy, dict):
        return json.dumps(policy).encode(), "application/json"
    return policy.encode(), "application/yaml"  # JSON text is YAML too


async def submit(session: AsyncSession, settings: Settings, runner: WhatIfRunner, requested_by: str, body: WhatIfIn) -> WhatIfRun:
    candidate = checked_candidate(*_document(body.policy), settings.max_policy_bytes, settings.longest_completion_ms)
    if not await asyncio.to_thread(day_has_records, str(settings.records_dir.resolve()), body.date):
        raise NotFound(f"no work records of {body.date.isoformat()}", code="no_records", date=body.date.isoformat())
    if (reason := await asyncio.to_thread(spark_unavailable, settings)) is not None:
        raise ServiceUnavailable(f"the what-if job cannot run here: {reason}", code="spark_unavailable")
    await session.execute(
        delete(WhatIfRun).where(
            WhatIfRun.state.in_(FINISHED), WhatIfRun.finished_at < utcnow() - timedelta(days=settings.whatif_retention_days)
        )
    )
    run = WhatIfRun(
        state="queued",
        run_date=body.date,
        application_environment=body.environment,
        seed=body.seed,
        candidate=candidate,
        requested_by=requested_by,
    )
    session.add(run)
    await session.commit()
    runner.kick()
    return run


async def _run(session: AsyncSession, run_id: int) -> WhatIfRun:
    run = await session.get(WhatIfRun, run_id)
    if run is None:
        raise NotFound(f"no what-if run {run_id} (runs are kept for WLM_WHATIF_RETENTION_DAYS)", code="not_found", id=run_id)
    return run


async def get(session: AsyncSession, runner: WhatIfRunner, run_id: int) -> WhatIfRun:
    """The run; one whose process is gone without an end is failed now."""
    run = await _run(session, run_id)
    if run.state == "running" and runner.alive(run) is False:
        run.state, run.finished_at, run.error, run.progress = "failed", utcnow(), GONE, None
        await session.commit()
    return run


async def cancel(session: AsyncSession, runner: WhatIfRunner, run_id: int) -> WhatIfRun:
    """Cancel a queued run, or end a running one's process; a run already done or failed stays so (409)."""
    run = await _run(session, run_id)
    if run.state in ("done", "failed"):
        raise Conflict(f"what-if run {run_id} is {run.state} already", code="run_finished", state=run.state)
    if run.state != "cancelled":
        run.state, run.finished_at, run.progress = "cancelled", utcnow(), None
        await session.commit()
        runner.kill(run)
        runner.kick()  # the next queued run
    return run


def run_out(run: WhatIfRun) -> WhatIfOut:
    return WhatIfOut(
        id=run.id,
        state=run.state,  # type: ignore[arg-type]  # the table's check holds it to the states
        date=run.run_date,
        environment=run.application_environment,
        seed=run.seed,
        requested_by=run.requested_by,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        progress=run.progress,
        error=run.error,
        result=run.result,
    )
