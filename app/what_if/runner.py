"""Running what-if jobs, one at a time, each in a child process (`python -m spark_jobs.what_if`, a driver JVM of its
own): the oldest queued run is claimed when none runs, its stage lines become its progress, and its exit decides its
end: done with its result, failed with why. A run whose process is gone without an end (killed, or the service
restarted under it) is failed when next looked at."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db import utcnow
from app.processes import process_alive
from app.what_if.models import WhatIfRun
from spark_jobs.what_if.arguments import NO_RECORDS_EXIT

HOST = socket.gethostname()
GONE = "the job's process ended without a result"
# The job's stage lines are `[what-if   3.2s] message`: the message is the progress.
_STAGE_PREFIX = "[what-if"


def job_command(settings: Settings, run: WhatIfRun, policy: Path, output: Path) -> list[str]:
    """The job's command line for `run`, with this service's settings (where its data and database are, how the
    driver runs, the manager's settings the replay runs with)."""
    command = [sys.executable, "-m", "spark_jobs.what_if", "--date", run.run_date.isoformat(), "--policy", str(policy)]
    command += ["--output", str(output), "--seed", str(run.seed), "--master", settings.spark_master]
    command += ["--data-dir", str(settings.data_dir.resolve()), "--database-url", settings.resolved_database_url]
    command += ["--driver-memory", settings.spark_driver_memory]
    command += ["--goal-interval", str(settings.goal_interval_seconds), "--goal-window", str(settings.goal_window_seconds)]
    command += ["--promotion-seconds", str(settings.blocked_promotion_seconds)]
    command += ["--promotion-share", str(settings.blocked_promotion_share)]
    if run.application_environment:
        command += ["--environment", run.application_environment]
    if settings.spark_java_home is not None:
        command += ["--java-home", str(settings.spark_java_home)]
    if not settings.spark_class_archive:
        command.append("--no-class-archive")
    return command


class WhatIfRunner:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self.sessions = sessions
        self.settings = settings
        self.directory = settings.data_dir / "what-if"
        self._task: asyncio.Task[None] | None = None
        self._current: int | None = None  # the run this process claimed, from its claim to its end
        self._processes: dict[int, asyncio.subprocess.Process] = {}

    def kick(self) -> None:
        """Run what is queued, if this process is not at it already."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="what-if runner")

    async def stop(self) -> None:
        """End the job this process runs (it is failed: the service stopped under it) and the runner."""
        for run_id in list(self._processes):
            await self._end(run_id, "failed", error="the service stopped while it ran")
            self.kill_local(run_id)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def alive(self, run: WhatIfRun) -> bool | None:
        """Whether `run`'s process lives; None when another host runs it (only that host can tell)."""
        if run.host != HOST:
            return None
        if run.id == self._current:
            return True
        # Its job, once started; till then the process that claimed it, which starts the job.
        process = run.pid if run.pid is not None else run.claimed_by
        return process is not None and process_alive(process)

    def kill_local(self, run_id: int) -> None:
        process = self._processes.get(run_id)
        if process is not None and process.returncode is None:
            # The job leads a process group of its own: the driver's JVM goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    def kill(self, run: WhatIfRun) -> None:
        """End `run`'s process, if it runs on this host."""
        if run.id in self._processes:
            self.kill_local(run.id)
        elif run.host == HOST and run.pid is not None and process_alive(run.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)

    async def _drain(self) -> None:
        while (run := await self._claim()) is not None:
            self._current = run.id
            try:
                await self._run(run)
            finally:
                self._current = None

    async def _claim(self) -> WhatIfRun | None:
        """The oldest queued run, now running here; None when one runs (alive), another process claimed one first,
        or none is queued."""
        try:
            async with self.sessions() as session, session.begin():
                running = (await session.scalars(select(WhatIfRun).where(WhatIfRun.state == "running"))).all()
                for run in running:
                    if self.alive(run) is not False:
                        return None
                    run.state, run.finished_at, run.error, run.progress = "failed", utcnow(), GONE, None
                await session.flush()
                queued = await session.scalar(select(WhatIfRun).where(WhatIfRun.state == "queued").order_by(WhatIfRun.id).limit(1))
                if queued is None:
                    return None
                queued.state, queued.started_at, queued.progress = "running", utcnow(), "starting"
                queued.host, queued.claimed_by = HOST, os.getpid()
        except IntegrityError:
            return None  # another process claimed one first (one running at most: uq_what_if_runs_one_running)
        return queued

    async def _run(self, run: WhatIfRun) -> None:
        policy, output = self.directory / f"run-{run.id}.policy.json", self.directory / f"run-{run.id}.json"
        await asyncio.to_thread(_write_policy, policy, run.candidate)
        process = await asyncio.create_subprocess_exec(
            *job_command(self.settings, run, policy, output),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self._processes[run.id] = process
        try:
            if not await self._update(run.id, pid=process.pid):
                self.kill_local(run.id)  # cancelled while its job started
            last_lines = await self._follow(run.id, process)
            code = await process.wait()
            if code == 0:
                result = await asyncio.to_thread(_read_result, output)
                await self._end(run.id, "done", result=result)
            else:
                error = next((line for line in reversed(last_lines) if "no_records" in line), None) if code == NO_RECORDS_EXIT else None
                reason = error or " / ".join(last_lines[-3:]) or f"exit status {code}"
                await self._end(run.id, "failed", error=reason[:2000])
        finally:
            self._processes.pop(run.id, None)
            await asyncio.to_thread(_remove, policy, output)

    async def _follow(self, run_id: int, process: asyncio.subprocess.Process) -> list[str]:
        """The job's stage lines as the run's progress; its last lines, for a failure's reason."""
        assert process.stderr is not None
        lines: list[str] = []
        async for raw in process.stderr:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            lines = [*lines[-9:], line]
            if line.startswith(_STAGE_PREFIX) and "]" in line:
                await self._update(run_id, progress=line.split("]", 1)[1].strip()[:500])
        return lines

    async def _update(self, run_id: int, **values: Any) -> bool:
        """`values` set on the run while it runs; False if it does not (cancelled)."""
        async with self.sessions() as session, session.begin():
            result = await session.execute(update(WhatIfRun).where(WhatIfRun.id == run_id, WhatIfRun.state == "running").values(**values))
        return bool(result.rowcount)  # type: ignore[attr-defined]  # an UPDATE's result has its row count

    async def _end(self, run_id: int, state: str, **values: Any) -> None:
        """`state` unless the run ended otherwise meanwhile (cancelled)."""
        await self._update(run_id, state=state, finished_at=utcnow(), progress=None, **values)


def _write_policy(path: Path, candidate: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(candidate))


def _read_result(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
