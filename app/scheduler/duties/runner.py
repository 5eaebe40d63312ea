"""The runner of the background duties: each duty in a loop of its own, one pass every interval.

They run on the elected scheduler only (app/scheduler/service.py): started when this process takes the role,
stopped when it loses it, and each pass skipped unless the role is still held (`may_act`). The launcher runs on
every host instead (see `Duties.__init__`). Every script they run is atomic and safe to run from several processes
at once, so a moment of overlap at a hand-over is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from app.errors import Fenced, unavailable, unavailable_dependency
from app.scheduler.duties.context import DutyContext
from app.scheduler.duties.delay_sampling import DelaySampling
from app.scheduler.duties.exits import ExitDelivery
from app.scheduler.duties.launcher import Launcher
from app.scheduler.duties.leases import LeaseExpiry
from app.scheduler.duties.management import GoalManagement
from app.scheduler.duties.records import RecordFlushing
from app.scheduler.duties.sweeping import QueueSweeping
from app.scheduler.service import SchedulerMember
from app.shared.repeated_failures import RepeatedFailures
from app.state import AppState
from app.work import records

log = logging.getLogger(__name__)

# How long stopping waits for the passes under way to end.
STOP_WAIT_SECONDS = 10


# A duty of a layer above the scheduler's, given by the composition (app/main.py): its name, interval and pass.
Extra = tuple[str, float, Callable[[], Awaitable[object]]]


class Duties:
    def __init__(
        self,
        state: AppState,
        epoch: int,
        may_act: Callable[[], bool],
        owner: str,
        *,
        launcher: bool = False,
        extra: Sequence[Extra] = (),
    ) -> None:
        """`epoch`: the scheduler's fencing token these duties act under; `may_act`: whether the role is still held;
        `owner`: this process in the duties' own leases (the same after a re-election, so it finds them its own).
        With `launcher`, only the launcher: it starts servers on this host, for this host's node, under a lease of
        its own per node, so it runs on every host rather than on the scheduler's only. `extra`: more duties of
        the scheduler (rendering /metrics: app/health/exposition.py)."""
        self.extra = extra
        self.state, self.may_act = state, may_act
        self.context = DutyContext(state, epoch, owner)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._outages = RepeatedFailures(log)  # duties waiting for Redis or the database
        self._launches = launcher
        self.launcher: Launcher | None = None
        self.records: RecordFlushing | None = None
        self.exits: ExitDelivery | None = None
        self.delays: DelaySampling | None = None

    async def start(self) -> None:
        settings = self.state.settings
        if self._launches:
            host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
            self.launcher = Launcher(self.state, settings.node, f"http://{host}:{settings.port}")
            self._tasks.append(
                asyncio.create_task(self._every(settings.lease_check_seconds, self.launcher.reconcile), name="wlm-duty-launcher")
            )
            return
        await records.start_writer()
        self.records, self.exits = RecordFlushing(self.context), ExitDelivery(self.context)
        self.delays = DelaySampling(self.context)
        for name, interval, duty in (
            ("leases", settings.lease_check_seconds, LeaseExpiry(self.context).expire_leases),
            ("records", settings.records_flush_seconds, self.records.flush_records),
            ("exits", settings.lease_check_seconds, self.exits.deliver_exits),
            ("goals", settings.goal_interval_seconds, GoalManagement(self.context, self.delays.book).manage_to_goals),
            ("delays", settings.sample_interval_ms / 1000, self.delays.sample_delays),
            *(
                [("sweeper", settings.sweeper_interval_seconds, QueueSweeping(self.context).sweep_queues)]
                if settings.sweeper_enabled
                else []
            ),
            *self.extra,
        ):
            self._tasks.append(asyncio.create_task(self._every(interval, duty), name=f"wlm-duty-{name}"))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # none when starting was cut short
            await asyncio.wait(self._tasks, timeout=STOP_WAIT_SECONDS)
        if self.launcher is not None:
            await self.launcher.stop()
        elif self.records is not None:  # the scheduler's duties, which had started
            await self.records.flush_at_stop()
        if self.delays is not None:
            await self.delays.write_at_stop()
        if self.exits is not None:
            await self.exits.close()

    async def _every(self, interval: float, duty: Callable[[], Awaitable[object]]) -> None:
        # The flag, not only the cancellation: a driver that turns a CancelledError into another error (seen
        # with database calls cancelled mid-flight) must not keep a stopping service's duty alive.
        name = getattr(duty, "__name__", str(duty))
        while not self._stopping:
            try:
                if self.may_act():
                    await duty()
                    self._outages.succeeded(f"background duty {name}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopping:
                    return
                if isinstance(exc, Fenced):
                    # Deposed while paused: the next heartbeat stops these duties.
                    log.warning(
                        "scheduler duty %s refused: a newer scheduler acts (epoch %s > %s)",
                        name,
                        exc.details.get("epoch"),
                        self.context.epoch,
                    )
                elif unavailable(exc):
                    # Not the duty's failure: it waits for its store to come back (said once per outage, not per tick).
                    self._outages.failed(f"background duty {name}", f"waiting for the {unavailable_dependency(exc)} to answer")
                else:
                    log.exception("background duty %s failed; retrying", name)
            await asyncio.sleep(interval)


def scheduled_duties(state: AppState, extra: Sequence[Extra] = ()) -> SchedulerMember:
    """This process's election membership: the background duties (with `extra`) run while it holds the scheduler's role."""
    running: list[Duties] = []

    async def on_active(epoch: int) -> None:
        duties = Duties(state, epoch, member.may_act, member.name, extra=extra)
        running.append(duties)
        await duties.start()

    async def on_inactive() -> None:
        while running:
            await running.pop().stop()

    member = SchedulerMember(state.queues.context, state.settings, on_active, on_inactive)
    return member
