"""This process as a member of the scheduler election (after TIBCO Rendezvous distributed queues: docs/sources.md).

Every member heartbeats the election script (lua/elect.lua) every `scheduler_heartbeat_seconds`. The
live member of the highest weight holds the role; when the holder is silent for `scheduler_activation_seconds`, the
highest-weight live member takes over with the next epoch (the fencing token). The holder runs the background duties;
it stops them when it loses the role, when a heavier member joins, and by itself when it could not renew the role
within the activation interval (it may have been replaced meanwhile: `may_act` is false from then on, so a member
that was paused and wakes up does not act on an old belief).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from app.config import Settings
from app.events.service import publish, subject
from app.redis.context import RedisContext
from app.scheduler.election import Election, Member, SchedulerElection

log = logging.getLogger(__name__)

# How long stopping waits for a heartbeat under way (it may be starting or stopping the duties).
STOP_WAIT_SECONDS = 15.0


def member_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"


class SchedulerMember:
    def __init__(
        self,
        context: RedisContext,
        settings: Settings,
        on_active: Callable[[int], Awaitable[None]],
        on_inactive: Callable[[], Awaitable[None]],
    ) -> None:
        self.context, self.election, self.settings = context, SchedulerElection(context), settings
        self.name = member_name()
        self.on_active, self.on_inactive = on_active, on_inactive
        self.epoch: int | None = None  # set while this member holds the role
        self._renewed_at = 0.0  # monotonic time of the last successful renewal
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._info = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def may_act(self) -> bool:
        """Whether this member may still act as scheduler: it holds the role and renewed it within the activation
        interval (after that, another member may have taken over)."""
        return self.active and time.monotonic() - self._renewed_at < self.settings.scheduler_activation_seconds

    async def beat(self) -> Election | None:
        """One heartbeat: renew, take or give up the role, and start or stop the duties to match."""
        started = time.monotonic()
        try:
            election = await self._elect()
        except RedisError as exc:
            log.warning("scheduler election: Redis unreachable (%s)", exc)
            if self.active and not self.may_act():
                await self._deactivate("could not renew the role within the activation interval")
            return None
        if election.active:
            self._renewed_at = started
            if self.epoch != election.epoch:
                await self._activate(election.epoch)
        elif self.active:
            await self._deactivate(election.outcome)
        return election

    async def _elect(self) -> Election:
        activation_ms = int(self.settings.scheduler_activation_seconds * 1000)
        return await self.election.elect(self.name, self.settings.scheduler_weight, activation_ms, self._info)

    async def _activate(self, epoch: int) -> None:
        """Start the duties under `epoch`. Only once they started is the epoch this member's: a start that failed is
        tried again at the next heartbeat (which finds the role still held, and the epoch not yet taken up)."""
        if self.active:
            await self._deactivate("a new epoch")
        try:
            await self.on_active(epoch)
        except Exception:
            log.exception("the scheduler's duties did not start (epoch %d); trying again at the next heartbeat", epoch)
            await self.on_inactive()
            return
        # Starting the duties can outlast the activation interval on a loaded host, and another member may have
        # taken a later epoch and announced it meanwhile. Renewed first, the announcement comes within an
        # activation interval of the renewal, before any later epoch can be taken: ACTIVE advisories come in epoch
        # order (unless this process stalls between the check below and the publish, as any lease allows).
        renewing = time.monotonic()
        try:
            election = await self._elect()
        except RedisError as exc:
            log.warning("scheduler election: Redis unreachable while taking up epoch %d (%s)", epoch, exc)
            election = None
        renewed = election is not None and election.active and election.epoch == epoch
        if not renewed or time.monotonic() - renewing >= self.settings.scheduler_activation_seconds:
            log.warning("the scheduler's role (epoch %d) was lost while its duties started; stopping them", epoch)
            await self.on_inactive()
            return
        self._renewed_at = renewing
        self.epoch = epoch
        log.info("this process (%s) is the scheduler, epoch %d", self.name, epoch)
        await publish(
            self.context,
            subject("WLM", "INFO", "SCHEDULER", "ACTIVE", self.name),
            member=self.name,
            epoch=epoch,
            weight=self.settings.scheduler_weight,
        )

    async def _deactivate(self, reason: str) -> None:
        epoch, self.epoch = self.epoch, None
        log.info("this process (%s) is no longer the scheduler (epoch %s): %s", self.name, epoch, reason)
        await self.on_inactive()
        await publish(
            self.context, subject("WLM", "INFO", "SCHEDULER", "INACTIVE", self.name), member=self.name, epoch=epoch, reason=reason
        )

    async def start(self) -> None:
        """The first heartbeat now (a lone member holds the role before serving), then one every interval."""
        await self.beat()
        self._task = asyncio.create_task(self._beating(), name="wlm-scheduler-election")

    async def _beating(self) -> None:
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), self.settings.scheduler_heartbeat_seconds)
                return
            except TimeoutError:
                pass
            try:
                await self.beat()
            except Exception:
                log.exception("scheduler heartbeat failed; trying again")

    async def stop(self) -> None:
        """Leave the election; a holder resigns so another member takes over at once rather than after the
        activation interval. A heartbeat under way finishes first (cut short, it could leave duties half started)."""
        self._stopping.set()
        if self._task is not None:
            done, _ = await asyncio.wait([self._task], timeout=STOP_WAIT_SECONDS)
            if not done:
                self._task.cancel()
                done, _ = await asyncio.wait([self._task], timeout=STOP_WAIT_SECONDS)
            if not done:
                log.warning("the scheduler heartbeat did not stop within %.0f s; leaving it", 2 * STOP_WAIT_SECONDS)
        if self.active:
            await self._deactivate("stopping")
        try:
            await self.election.resign(self.name)
        except RedisError:
            log.warning("could not resign from the scheduler election (Redis unreachable)")


async def scheduler_status(context: RedisContext) -> tuple[dict[str, str], list[Member]]:
    """The holder's hash and the members, heaviest first (Redis's time for their ages)."""
    holder, members = await SchedulerElection(context).status()
    members.sort(key=lambda m: (-m.weight, m.member))
    return holder, members
