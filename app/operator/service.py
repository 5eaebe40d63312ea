"""Application environment states: kept in the database, changed by operator commands and internal events (the
DISPLAY command is app.operator.display).

A change is one transaction: the state row (read FOR UPDATE on PostgreSQL; on SQLite the row's version makes a lost
update fail instead) and its audit event, so two concurrent commands cannot both pass the state check and the audit
trail holds exactly the changes made. Every process caches the states for a short time (OperatorStore).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from app.audit.models import AuditEvent
from app.audit.service import list_events, record
from app.db import utcnow
from app.errors import Conflict, NotFound
from app.events.service import publish, subject
from app.operator.commands import COMMAND_MAX_LENGTH, Action, DisplayCommand, VaryCommand, parse_command, parse_vary_body
from app.operator.models import REASON_MAX_LENGTH, ApplicationEnvironmentState
from app.operator.schemas import OperatorCommandList, OperatorCommandOut
from app.operator.states import UNEXPECTED_TERMINATION_WINDOW_S, AEState, InternalEvent, stopped_after, transition
from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.shared.generation import GatedValue, Generations, count_change

log = logging.getLogger(__name__)

VARY_ACTION = "operator.vary"
EVENT_ACTION = "operator.event"
# Who changes a state on an internal event, in the state row and the audit trail.
SYSTEM_ACTOR = "wlm"
UNKNOWN_APPLICATION_ENVIRONMENT = "unknown_application_environment"
# A change that keeps meeting another process's change to the same row gives up after this many tries.
CHANGE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class AEStateRecord:
    state: AEState
    changed_at: datetime
    changed_by: str
    reason: str
    refreshed_at: datetime | None


def _record_of(row: ApplicationEnvironmentState) -> AEStateRecord:
    return AEStateRecord(AEState(row.state), row.changed_at, row.changed_by, row.reason, row.refreshed_at)


def state_in(states: Mapping[str, AEStateRecord], name: str, policy: ActivePolicy | None) -> AEState:
    stored = states.get(name)
    if stored is None:
        return AEState.AVAILABLE
    # Left the policy: DELETING at once, whether or not the manager loop has reported removed_from_policy yet.
    if policy is None or name not in policy.application_environments:
        return AEState.DELETING
    return stored.state


class OperatorStore:
    """The stored states, cached per process until the settings' counter moves, like PolicyStore (a change on this
    process is seen at once, another replica's within the counter's time)."""

    def __init__(self, generations: Generations) -> None:
        self._states: GatedValue[Mapping[str, AEStateRecord]] = GatedValue(generations, self._load)

    async def states(self) -> Mapping[str, AEStateRecord]:
        """Every application environment that has a row; the others are AVAILABLE."""
        return await self._states.get()

    @staticmethod
    async def _load(session: AsyncSession) -> Mapping[str, AEStateRecord]:
        rows = await session.scalars(select(ApplicationEnvironmentState))
        return MappingProxyType({row.name: _record_of(row) for row in rows})

    async def state_of(self, name: str, policy: ActivePolicy | None) -> AEState:
        return state_in(await self.states(), name, policy)

    async def forget(self, session: AsyncSession, names: Sequence[str]) -> None:
        """Delete the states of environments that are gone for good (a departed queue manager's dynamic ones), in the
        caller's transaction (which counts the change: app.shared.generation.count_change)."""
        await session.execute(delete(ApplicationEnvironmentState).where(ApplicationEnvironmentState.name.in_(names)))

    def invalidate(self) -> None:
        self._states.clear()


# ---------------------------------------------------------------------------------------------------------------------
# Changing a state
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VaryResult:
    command: VaryCommand
    previous_state: AEState
    state: AEState
    changed_at: datetime
    changed_by: str


def parse_operator_command(data: Any) -> VaryCommand | DisplayCommand:
    """A POST /v1/operator/commands body (decoded JSON): a VARY in either form, or the text of a DISPLAY, answered like
    GET /v1/application-environments. Anything else is refused as the VARY body it most resembles."""
    text = data.get("command") if isinstance(data, dict) and len(data) == 1 else None
    if isinstance(text, str) and len(text) <= COMMAND_MAX_LENGTH:
        return parse_command(text)
    return parse_vary_body(data)


async def vary(
    session: AsyncSession, store: OperatorStore, queues: QueueStore, policy: ActivePolicy, actor: str, command: VaryCommand
) -> VaryResult:
    """Apply an operator's VARY and announce the new state. A refusal (unknown environment, wrong state) is audited
    too, then raised. A REFRESH puts the policy's server limits back in force (IWM4SLI's hold until then)."""
    name = command.application_environment
    audited = {"command": str(command), "dynamic": command.dynamic}
    try:
        _check_named(policy, command)
        previous, state, row = await _change(session, store, name, command.action, actor, str(command), VARY_ACTION, audited)
    except (NotFound, Conflict) as refused:
        await session.rollback()
        current = refused.details.get("state")
        record(session, actor, VARY_ACTION, name, **audited, result="refused", error=refused.code, message=refused.message, state=current)
        await session.commit()
        raise
    assert row is not None  # every command changes the state
    if command.action is Action.REFRESH:
        await queues.environments.reset_server_limits(name)
    if state != previous:
        await publish(
            queues.context, subject("WLM", "INFO", "APPLENV", "STATE", name),
            previous_state=previous, state=state, command=str(command), by=row.changed_by,
        )  # fmt: skip
    return VaryResult(command, previous, state, row.changed_at, row.changed_by)


async def list_commands(session: AsyncSession, limit: int, offset: int) -> OperatorCommandList:
    """The VARY commands of the audit trail, accepted and refused, newest first."""
    events, total = await list_events(session, action=VARY_ACTION, limit=limit, offset=offset)
    return OperatorCommandList(items=[_command_out(event) for event in events], total=total, limit=limit, offset=offset)


def _command_out(event: AuditEvent) -> OperatorCommandOut:
    return OperatorCommandOut(id=event.id, at=event.at, actor=event.actor, application_environment=event.target, **event.detail)


def _check_named(policy: ActivePolicy, command: VaryCommand) -> None:
    name = command.application_environment
    dynamic = name in policy.dynamic
    static = name in policy.application_environments and not dynamic
    if command.dynamic and not dynamic:
        if static:
            raise Conflict(
                f"{name} is an application environment of the service definition, not a dynamic one: use APPLENV={name}",
                code="not_dynamic",
                application_environment=name,
            )
        raise NotFound(
            f"no queue manager has defined a dynamic application environment {name}",
            code=UNKNOWN_APPLICATION_ENVIRONMENT,
            application_environment=name,
        )
    if dynamic and not command.dynamic:
        raise Conflict(f"{name} is a dynamic application environment: use DYNAPPL={name}", code="dynamic", application_environment=name)
    if not static and not dynamic:
        raise NotFound(
            f"the active policy (version {policy.version}) has no application environment {name}",
            code=UNKNOWN_APPLICATION_ENVIRONMENT,
            application_environment=name,
        )


async def count_unexpected_terminations(
    sessions: async_sessionmaker[AsyncSession], queues: QueueStore, store: OperatorStore, keys: AeKeys, terminated: Sequence[str]
) -> None:
    """Servers that ended without disconnecting, or launched servers that failed to start (`terminated`: server ids
    or launched instances): five such terminations within ten minutes put the environment in STOPPED (z/OS WLM's
    rule)."""
    for who in terminated:
        now, times = await queues.environments.record_termination(keys, who, int(UNEXPECTED_TERMINATION_WINDOW_S * 1000))
        if stopped_after(times, now):
            async with sessions() as session:
                window = f"{UNEXPECTED_TERMINATION_WINDOW_S:.0f} s"
                reason = f"{len(times)} unexpected server terminations or failed starts on {keys.node} within {window}"
                if await apply_event(session, store, keys.ae, InternalEvent.UNEXPECTED_TERMINATIONS_EXCEEDED, reason) is AEState.STOPPED:
                    log.warning("%s is STOPPED: %s; RESUME it once the cause is fixed", keys.ae, reason)
                    await publish(queues.context, subject("WLM", "INFO", "APPLENV", "STATE", keys.ae), state=AEState.STOPPED, reason=reason)


async def apply_event(session: AsyncSession, store: OperatorStore, name: str, event: InternalEvent, reason: str) -> AEState:
    """Apply what the manager loop observed (`reason` says more, e.g. which servers drained); returns the state after it.
    An event that does not matter in the current state changes, stores and audits nothing."""
    text = f"{event}: {reason}" if reason else str(event)
    _, state, _ = await _change(session, store, name, event, SYSTEM_ACTOR, text, EVENT_ACTION, {"event": event.value, "reason": reason})
    return state


async def _change(
    session: AsyncSession,
    store: OperatorStore,
    name: str,
    event: Action | InternalEvent,
    actor: str,
    reason: str,
    audit_action: str,
    audited: dict[str, Any],
) -> tuple[AEState, AEState, ApplicationEnvironmentState | None]:
    """(previous state, new state, the row as stored or None when nothing changed), or the Conflict of transition()."""
    for _ in range(CHANGE_ATTEMPTS):
        row = await session.scalar(select(ApplicationEnvironmentState).where(ApplicationEnvironmentState.name == name).with_for_update())
        previous = AEState(row.state) if row is not None else AEState.AVAILABLE
        state = transition(previous, event)
        if state == previous:
            await session.rollback()  # releases the row lock
            return previous, state, None
        now = utcnow()
        if row is None:
            row = ApplicationEnvironmentState(name=name)
            session.add(row)
        row.state, row.changed_at, row.changed_by, row.reason = state.value, now, actor, reason[:REASON_MAX_LENGTH]
        if event is Action.REFRESH:
            row.refreshed_at = now
        record(session, actor, audit_action, name, **audited, result="accepted", previous_state=previous.value, state=state.value)
        try:
            await count_change(session)
            await session.commit()
        except (IntegrityError, StaleDataError):
            # Another process inserted or changed the row since it was read (SQLite; PostgreSQL only for a first
            # row, which FOR UPDATE cannot lock before it exists): read it again and decide again.
            await session.rollback()
            continue
        store.invalidate()
        return previous, state, row
    raise Conflict(f"the state of {name} kept changing under this command; try again", code="concurrent_change")
