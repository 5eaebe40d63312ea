"""QUIESCING, REFRESHING and RESUMING environments move on once the servers they wait for are gone (the operator's
state machine, app/operator/states.py): checked in the scheduler's lease pass, right after silent servers were
closed, so one process decides and announces each move."""

from __future__ import annotations

from sqlalchemy import func, select

from app.connections.models import Connection
from app.events.service import subject
from app.operator.service import apply_event
from app.operator.states import AEState, InternalEvent
from app.policy.active import ActivePolicy
from app.scheduler.duties.context import DutyContext

WAITING_FOR_SERVERS = (AEState.QUIESCING, AEState.REFRESHING, AEState.RESUMING)


async def report_drained(context: DutyContext, policy: ActivePolicy) -> None:
    state = context.state
    for name, record in (await state.operator.states()).items():
        if record.state not in WAITING_FOR_SERVERS or name not in policy.application_environments:
            continue
        query = select(func.count()).where(
            Connection.role == "server", Connection.state == "active", Connection.application_environment == name
        )
        if record.state is AEState.REFRESHING and record.refreshed_at is not None:
            query = query.where(Connection.connected_at < record.refreshed_at)  # the replacements may stay
        async with state.sessions() as session:
            if record.state is AEState.RESUMING or not await session.scalar(query):
                moved = await apply_event(session, state.operator, name, InternalEvent.SERVERS_DRAINED, f"from {record.state}")
                if moved is not record.state:
                    await context.advise(
                        subject("WLM", "INFO", "APPLENV", "STATE", name), previous_state=record.state, state=moved, reason="servers drained"
                    )
