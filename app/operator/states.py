"""The state of an application environment, what changes it and what it means for work and servers (pure).

    AVAILABLE --QUIESCE--> QUIESCING --servers_drained--> QUIESCED --RESUME--> RESUMING --servers_drained--> AVAILABLE
    AVAILABLE --REFRESH--> REFRESHING --servers_drained--> AVAILABLE
    AVAILABLE, RESUMING, REFRESHING --unexpected_terminations_exceeded--> STOPPED --RESUME--> RESUMING
                                                                          STOPPED --QUIESCE--> QUIESCING
    any --removed_from_policy--> DELETING --readded_to_policy--> AVAILABLE

Commands are the operator's (VARY WLM,APPLENV=...): one that is not valid in the current state is refused with a
Conflict (409) that carries the state. The internal events are facts the service observes; a fact that does not
matter in the current state changes nothing, because the observer cannot help reporting some late or twice (servers
drained of a refresh that a terminations count has since turned into STOPPED, say).

servers_drained means the servers the transitional state waits for are gone: all of them (QUIESCING), those started
before the refresh (REFRESHING), none (RESUMING: z/OS waits for every system of the sysplex to accept the resume; here
there is one service, so the first pass after the command reports it).

Where IWM's queueing manager services leave room, these follow z/OS ("Using operator commands for application environments"):
- QUIESCE is valid from AVAILABLE and from STOPPED: z/OS advises quiescing a STOPPED environment before resuming it, so
  that no server survives with back-level code. Either way no server starts until RESUME, the only way back to work
  from STOPPED and QUIESCED.
- REFRESH is valid from AVAILABLE only: from QUIESCED or STOPPED it would start servers, which only RESUME may do.
- Repeating a command whose effect is under way or done (QUIESCE while QUIESCING or QUIESCED) is refused too; the
  409's state tells the operator so.
- DELETING has no way out but readded_to_policy (the environment is AVAILABLE again, as in a newly activated policy):
  once its servers are gone the store forgets the environment, so servers_drained leaves it DELETING.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from app.errors import Conflict
from app.operator.commands import Action

# Five unexpected server terminations within ten minutes stop an application environment (z/OS's numbers).
UNEXPECTED_TERMINATION_LIMIT = 5
UNEXPECTED_TERMINATION_WINDOW_S = 600.0


class AEState(StrEnum):
    AVAILABLE = "AVAILABLE"
    QUIESCING = "QUIESCING"
    QUIESCED = "QUIESCED"
    RESUMING = "RESUMING"
    REFRESHING = "REFRESHING"
    STOPPED = "STOPPED"
    DELETING = "DELETING"


class InternalEvent(StrEnum):
    SERVERS_DRAINED = "servers_drained"
    UNEXPECTED_TERMINATIONS_EXCEEDED = "unexpected_terminations_exceeded"
    REMOVED_FROM_POLICY = "removed_from_policy"
    READDED_TO_POLICY = "readded_to_policy"


# For each command, the states it is valid in and where it leads; every other state refuses it.
_COMMAND_TARGETS: dict[Action, dict[AEState, AEState]] = {
    Action.QUIESCE: {AEState.AVAILABLE: AEState.QUIESCING, AEState.STOPPED: AEState.QUIESCING},
    Action.RESUME: {AEState.QUIESCED: AEState.RESUMING, AEState.STOPPED: AEState.RESUMING},
    Action.REFRESH: {AEState.AVAILABLE: AEState.REFRESHING},
}
# For each internal event, the states it changes; every other state stays as it is.
_EVENT_TARGETS: dict[InternalEvent, dict[AEState, AEState]] = {
    InternalEvent.SERVERS_DRAINED: {
        AEState.QUIESCING: AEState.QUIESCED,
        AEState.REFRESHING: AEState.AVAILABLE,
        AEState.RESUMING: AEState.AVAILABLE,
    },
    InternalEvent.UNEXPECTED_TERMINATIONS_EXCEEDED: {
        AEState.AVAILABLE: AEState.STOPPED,
        AEState.RESUMING: AEState.STOPPED,
        AEState.REFRESHING: AEState.STOPPED,
    },
    InternalEvent.REMOVED_FROM_POLICY: {state: AEState.DELETING for state in AEState},
    InternalEvent.READDED_TO_POLICY: {AEState.DELETING: AEState.AVAILABLE},
}

_MAY_START_SERVERS = frozenset({AEState.AVAILABLE, AEState.RESUMING, AEState.REFRESHING})
# Queued work waits on the state itself in every other state (RMF's delay for an environment quiesced or stopped).
_WORK_FLOWS = frozenset({AEState.AVAILABLE, AEState.RESUMING})
# Told to end once their current requests are done (IWM4SSL's 0C14). STOPPED keeps its survivors: they work normally.
_SERVERS_MUST_END = frozenset({AEState.QUIESCING, AEState.QUIESCED, AEState.REFRESHING, AEState.DELETING})


def transition(state: AEState, event: Action | InternalEvent) -> AEState:
    """The state after `event`; a command not valid in `state` raises Conflict (409) with the state."""
    if isinstance(event, Action):
        targets = _COMMAND_TARGETS[event]
        if state not in targets:
            valid = [valid_state.value for valid_state in targets]
            raise Conflict(
                f"{event} is not valid while the application environment is {state}; it is valid when {' or '.join(valid)}",
                code="wrong_state",
                state=state.value,
                action=event.value,
                valid_states=valid,
            )
        return targets[state]
    return _EVENT_TARGETS[event].get(state, state)


def may_start_servers(state: AEState) -> bool:
    return state in _MAY_START_SERVERS


def holds_work_back(state: AEState) -> bool:
    """Whether queued work waits on the environment's state (quiescing or quiesced, stopped, refreshing, deleting)
    rather than on servers: RESUMING starts servers as AVAILABLE does."""
    return state not in _WORK_FLOWS


def servers_must_end(state: AEState) -> bool:
    """Whether servers are told to end after their current request. In REFRESHING this applies to the servers started
    before the refresh; their replacements run on."""
    return state in _SERVERS_MUST_END


def recent_terminations(termination_times: Sequence[float], now: float, window_s: float = UNEXPECTED_TERMINATION_WINDOW_S) -> list[float]:
    """The unexpected terminations that still count at `now`: those at most `window_s` seconds before it (a time after
    `now`, from a clock a little ahead, counts). Whoever keeps the times need keep only these."""
    return [time for time in termination_times if now - time <= window_s]


def stopped_after(
    termination_times: Sequence[float],
    now: float,
    limit: int = UNEXPECTED_TERMINATION_LIMIT,
    window_s: float = UNEXPECTED_TERMINATION_WINDOW_S,
) -> bool:
    """Whether the unexpected terminations stop the application environment: `limit` of them within `window_s` seconds
    up to `now`, both ends included (five terminations exactly ten minutes from first to last are within ten minutes)."""
    return len(recent_terminations(termination_times, now, window_s)) >= limit
