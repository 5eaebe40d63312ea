"""Select (IWM4SSL): a server ends what it asks to end, then is given work, waiting for it up to a long poll's time."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnInfo
from app.operator.service import OperatorStore
from app.operator.states import AEState, servers_must_end
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore
from app.queues.base import AeConfig
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.request_meta import RequestState
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, EndResult, Selected
from app.web import timing
from app.work.begin_end_delete import Ending, EndRequestArgs, settle, split_outcomes
from app.work.call_context import CallerConnections
from app.work.long_poll import POLL_FALLBACK_SECONDS, Dispatcher, Waiter
from app.work.schemas import SelectIn, SelectOut, WorkItemOut

# IWM4SSL's return: the server is not needed any more (its environment left the policy, or was quiesced,
# refreshed, or has surplus servers); it should end what it holds, disconnect and stop.
TERMINATE_REASON = "0C14"


@dataclass(frozen=True, slots=True)
class Selection:
    connections: CallerConnections
    ending: Ending
    operator: OperatorStore
    store: QueueStore
    policies: PolicyStore
    dispatcher: Dispatcher
    settings: Settings

    async def select(self, principal: PrincipalInfo, body: SelectIn) -> SelectOut | None:
        """Ends what the server asks to end, then work for it, waiting up to `wait_seconds`; None when nothing
        came in time and nothing was ended."""
        server = await self.connections.of(principal, body.connect_token, "server")
        ends: list[EndRequestArgs] = [(e.token, e) for e in body.end]
        assert server.node and server.application_environment
        policy = await self.policies.knowing(server.application_environment)
        config = policy.queue_config(server.application_environment)
        reason = (
            await self._reason_to_end(server, policy)
            if config is not None
            else "the application environment is no longer in the active policy"
        )
        if reason is not None:
            ended, end_errors = split_outcomes(ends, await self.ending.end_many(server, ends))
            return SelectOut(items=[], ended=ended, end_errors=end_errors, terminate=True, reason_code=TERMINATE_REASON, reason=reason)
        assert config is not None
        outcomes, valid = self.ending.prepare(server, ends)
        keys = self.store.keys(server.node, server.application_environment)
        wait = min(body.wait_seconds, self.settings.max_wait_seconds)
        if wait > 0:
            done, items, surplus = await self._wait_and_select(keys, config, server, body, time.monotonic() + wait, [v for _, v in valid])
        else:
            done, items, surplus = await self._try_select(keys, config, server, body, [v for _, v in valid])
        ended, end_errors = split_outcomes(ends, settle(ends, outcomes, valid, done))
        if surplus:
            reason = "the environment has more servers than its goals need (or than its maximum)"
            return SelectOut(items=[], ended=ended, end_errors=end_errors, terminate=True, reason_code=TERMINATE_REASON, reason=reason)
        if not items and not ended and not end_errors:
            return None
        return SelectOut(items=_items_out(keys, config, items), ended=ended, end_errors=end_errors)

    async def _reason_to_end(self, server: ConnInfo, policy: ActivePolicy) -> str | None:
        """Why the operator's state of the server's environment ends it (after what it ends in this call), if it
        does: QUIESCE (and QUIESCED, DELETING) ends every server; REFRESH those connected before it."""
        assert server.application_environment
        state = await self.operator.state_of(server.application_environment, policy)
        if not servers_must_end(state):
            return None
        if state is AEState.REFRESHING:
            record = (await self.operator.states()).get(server.application_environment)
            if record is None or record.refreshed_at is None or server.connected_at >= record.refreshed_at.timestamp():
                return None  # a replacement, started after the refresh
        return f"the application environment is {state}"

    async def _try_select(
        self, keys: AeKeys, config: AeConfig, server: ConnInfo, body: SelectIn, ends: list[EndArgs], waiter: Waiter | None = None
    ) -> tuple[list[EndResult], list[Selected], bool]:
        """What was ended, what was selected, and whether the server is surplus (to end: 0C14). A `waiter` is listed
        for inserts to wake when nothing was selected."""
        member = waiter.member if waiter is not None else ""
        timing.mark("script_call")
        result = await self.store.select(keys, config, server.id, body.max_items, begin=body.begin, ends=ends, waiter=member)
        timing.mark("script_reply")
        if result.refusal is not None:
            if result.status is ReturnCode.SERVER_SURPLUS:
                return result.ended, [], True
            if result.status is not ReturnCode.OVERFLOW_NOT_NEEDED:
                raise result.refusal
        if result.items:
            self.dispatcher.served(server.id)
        return result.ended, result.items, False

    async def _wait_and_select(
        self, keys: AeKeys, config: AeConfig, server: ConnInfo, body: SelectIn, deadline: float, ends: list[EndArgs]
    ) -> tuple[list[EndResult], list[Selected], bool]:
        """Registered as a waiter before the first attempt (which also ends `ends`); an attempt that finds nothing
        lists the waiter in Redis in the same script call, so an insert after it wakes this waiter."""
        assert server.worker_weight is not None
        waiter = Waiter(keys.node, keys.ae, server.id, server.worker_weight, server.overflow)
        self.dispatcher.register(waiter)
        items: list[Selected] = []
        surplus = False
        try:
            ended, items, surplus = await self._try_select(keys, config, server, body, ends, waiter)
            if items or surplus:
                return ended, items, surplus
            task = asyncio.current_task()
            while (remaining := deadline - time.monotonic()) > 0 and not self.dispatcher.draining:
                if task is not None and task.cancelling():
                    # The client went away (cancelled), but a library call on the way swallowed the
                    # cancellation (seen with the Redis client): stop waiting for a select nobody awaits.
                    raise asyncio.CancelledError
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that arrives
                # as the event fires, and a cancelled long poll would then wait out its full time.
                try:
                    async with asyncio.timeout(min(remaining, POLL_FALLBACK_SECONDS)):
                        await waiter.event.wait()
                except TimeoutError:
                    pass
                waiter.event.clear()
                if waiter.woken_at:  # timed (app/web/timing.py), and woken rather than timed out
                    timing.mark("woken", waiter.woken_at)
                    timing.mark("resumed")
                    waiter.woken_at = 0.0
                # The wake-up this select answers, if one was meant for this waiter alone: used once the select
                # looked (finding nothing means another took the work); still owed if it was refused or cut short.
                answering, waiter.owes_wake = waiter.owes_wake, False
                try:
                    _, items, surplus = await self._try_select(keys, config, server, body, [], waiter)
                except BaseException:
                    waiter.owes_wake = waiter.owes_wake or answering
                    raise
                if surplus:
                    waiter.owes_wake = waiter.owes_wake or answering
                if items or surplus:
                    return ended, items, surplus
            return ended, [], False
        finally:
            self.dispatcher.unregister(waiter)
            if waiter.owes_wake:
                self.dispatcher.pass_on(waiter)
            if not items and not surplus:  # (a select that took work or found a surplus unlisted it)
                self.dispatcher.in_background(self.store.unlist_waiter(keys, waiter.member), "unlist a waiter")


def _items_out(keys: AeKeys, config: AeConfig, items: list[Selected]) -> list[WorkItemOut]:
    """The payload stays the JSON text it was stored as: the route writes it into the answer as it is (encoded once,
    at the insert). One script selected them all at one instant (its clock's), so their lease ends are one time,
    made once rather than per item (half a microsecond each, timeit)."""
    lease_ends: dict[int, datetime] = {}
    # Likewise the requests of one insert share its instant.
    inserted: dict[int, datetime] = {}
    answers = []
    for selected in items:
        meta = selected.meta
        selected_ms = meta.selected
        assert selected_ms is not None  # the select stamped it
        lease_end = lease_ends.get(selected_ms)
        if lease_end is None:
            lease_end = lease_ends[selected_ms] = datetime.fromtimestamp((selected_ms + config.completion_time_ms) / 1000, UTC)
        inserted_ms = meta.inserted
        inserted_at = inserted.get(inserted_ms)
        if inserted_at is None:
            inserted_at = inserted[inserted_ms] = datetime.fromtimestamp(inserted_ms / 1000, UTC)
        answers.append(
            WorkItemOut(
                token=keys.token(selected.id, meta.life),
                service_class=meta.service_class,
                report_class=meta.report_class,
                payload=orjson.Fragment(selected.payload),
                userid=meta.userid,
                enclave=meta.enclave,
                state="begun" if meta.state is RequestState.BEGUN else "selected",
                deliveries=meta.deliveries,
                inserted_at=inserted_at,
                lease_expires_at=lease_end,
            )
        )
    return answers
