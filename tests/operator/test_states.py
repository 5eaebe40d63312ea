"""The application-environment state machine (app/operator/states.py): the full (state, event) matrix, what each state
means for work and servers, and the five-terminations-in-ten-minutes rule at its boundaries."""

from __future__ import annotations

import functools

import pytest

from app.errors import Conflict
from app.operator.commands import Action
from app.operator.states import (
    UNEXPECTED_TERMINATION_LIMIT,
    UNEXPECTED_TERMINATION_WINDOW_S,
    AEState,
    InternalEvent,
    may_start_servers,
    recent_terminations,
    servers_must_end,
    stopped_after,
    transition,
)

AVAILABLE, QUIESCING, QUIESCED, RESUMING, REFRESHING, STOPPED, DELETING = (
    AEState.AVAILABLE,
    AEState.QUIESCING,
    AEState.QUIESCED,
    AEState.RESUMING,
    AEState.REFRESHING,
    AEState.STOPPED,
    AEState.DELETING,
)
DRAINED, EXCEEDED, REMOVED, READDED = (
    InternalEvent.SERVERS_DRAINED,
    InternalEvent.UNEXPECTED_TERMINATIONS_EXCEEDED,
    InternalEvent.REMOVED_FROM_POLICY,
    InternalEvent.READDED_TO_POLICY,
)
REFUSED = None  # the command is refused with a 409

EVENTS = (Action.QUIESCE, Action.RESUME, Action.REFRESH, DRAINED, EXCEEDED, REMOVED, READDED)
# fmt: off
MATRIX: dict[AEState, tuple[AEState | None, ...]] = {
    #              QUIESCE    RESUME    REFRESH     drained    exceeded    removed   re-added
    AVAILABLE:  (QUIESCING,  REFUSED,  REFRESHING, AVAILABLE,  STOPPED,    DELETING, AVAILABLE),
    QUIESCING:  (REFUSED,    REFUSED,  REFUSED,    QUIESCED,   QUIESCING,  DELETING, QUIESCING),
    QUIESCED:   (REFUSED,    RESUMING, REFUSED,    QUIESCED,   QUIESCED,   DELETING, QUIESCED),
    RESUMING:   (REFUSED,    REFUSED,  REFUSED,    AVAILABLE,  STOPPED,    DELETING, RESUMING),
    REFRESHING: (REFUSED,    REFUSED,  REFUSED,    AVAILABLE,  STOPPED,    DELETING, REFRESHING),
    STOPPED:    (QUIESCING,  RESUMING, REFUSED,    STOPPED,    STOPPED,    DELETING, STOPPED),
    DELETING:   (REFUSED,    REFUSED,  REFUSED,    DELETING,   DELETING,   DELETING, AVAILABLE),
}
# fmt: on
CASES = [(state, event, target) for state, targets in MATRIX.items() for event, target in zip(EVENTS, targets, strict=True)]


def test_the_matrix_covers_every_state_and_event() -> None:
    assert set(MATRIX) == set(AEState)
    assert set(EVENTS) == set(Action) | set(InternalEvent)
    assert len(CASES) == len(AEState) * len(EVENTS)


@pytest.mark.parametrize(("state", "event", "target"), [case for case in CASES if case[2] is not REFUSED])
def test_transition(state: AEState, event: Action | InternalEvent, target: AEState) -> None:
    assert transition(state, event) is target


@pytest.mark.parametrize(("state", "action"), [(state, event) for state, event, target in CASES if target is REFUSED])
def test_a_command_not_valid_in_the_state_is_a_conflict_carrying_the_state(state: AEState, action: Action) -> None:
    valid_states = [valid.value for valid in MATRIX if MATRIX[valid][EVENTS.index(action)] is not REFUSED]
    with pytest.raises(Conflict) as caught:
        transition(state, action)
    error = caught.value
    assert (error.status, error.code) == (409, "wrong_state")
    assert error.details == {"state": state.value, "action": action.value, "valid_states": valid_states}
    assert error.message == (
        f"{action.value} is not valid while the application environment is {state.value}; it is valid when {' or '.join(valid_states)}"
    )


def test_only_commands_are_ever_refused() -> None:
    assert all(isinstance(event, Action) for _, event, target in CASES if target is REFUSED)


@pytest.mark.parametrize(
    ("state", "action", "message"),
    [
        (
            AVAILABLE,
            Action.RESUME,
            "RESUME is not valid while the application environment is AVAILABLE; it is valid when QUIESCED or STOPPED",
        ),
        (
            QUIESCED,
            Action.QUIESCE,
            "QUIESCE is not valid while the application environment is QUIESCED; it is valid when AVAILABLE or STOPPED",
        ),
        (STOPPED, Action.REFRESH, "REFRESH is not valid while the application environment is STOPPED; it is valid when AVAILABLE"),
    ],
)
def test_conflict_messages(state: AEState, action: Action, message: str) -> None:
    with pytest.raises(Conflict, match=f"^{message}$"):
        transition(state, action)


def test_conflict_renders_as_a_409_body_with_the_state() -> None:
    with pytest.raises(Conflict) as caught:
        transition(DELETING, Action.RESUME)
    assert caught.value.body() == {
        "error": {
            "code": "wrong_state",
            "message": "RESUME is not valid while the application environment is DELETING; it is valid when QUIESCED or STOPPED",
            "state": "DELETING",
            "action": "RESUME",
            "valid_states": ["QUIESCED", "STOPPED"],
        }
    }


@pytest.mark.parametrize(
    ("events", "final"),
    [
        # Quiesce to change the servers' libraries, then resume.
        ((Action.QUIESCE, DRAINED, Action.RESUME, DRAINED), AVAILABLE),
        ((Action.REFRESH, DRAINED), AVAILABLE),
        # Repeated crashes stop it; quiescing first ends the survivors, so that RESUME starts only fresh servers.
        ((EXCEEDED, Action.QUIESCE, DRAINED, Action.RESUME, DRAINED), AVAILABLE),
        ((EXCEEDED, Action.RESUME, DRAINED), AVAILABLE),
        # The replacements of a refresh crash as well.
        ((Action.REFRESH, EXCEEDED), STOPPED),
        # A late or repeated drain report changes nothing.
        ((Action.QUIESCE, DRAINED, DRAINED), QUIESCED),
        # Leaving the policy and coming back: available again, whatever the operator had done.
        ((Action.QUIESCE, DRAINED, REMOVED, DRAINED, READDED), AVAILABLE),
    ],
)
def test_sequences(events: tuple[Action | InternalEvent, ...], final: AEState) -> None:
    assert functools.reduce(transition, events, AVAILABLE) is final


# --------------------------------------------------------------------------------------------------------------------
# What a state means for servers
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "servers_may_start", "servers_end"),
    [
        (AVAILABLE, True, False),
        (QUIESCING, False, True),
        (QUIESCED, False, True),
        (RESUMING, True, False),
        (REFRESHING, True, True),
        (STOPPED, False, False),
        (DELETING, False, True),
    ],
)
def test_predicates(state: AEState, servers_may_start: bool, servers_end: bool) -> None:
    assert may_start_servers(state) is servers_may_start
    assert servers_must_end(state) is servers_end


# --------------------------------------------------------------------------------------------------------------------
# Five unexpected terminations within ten minutes
# --------------------------------------------------------------------------------------------------------------------

NOW = 10_000.0


@pytest.mark.parametrize(
    ("ages", "stopped"),
    [
        ((), False),
        ((0, 1, 2, 3), False),
        ((0, 1, 2, 3, 4), True),
        ((0, 0, 0, 0, 0), True),
        ((0, 1, 2, 3, 4, 5), True),
        # The oldest exactly ten minutes before now still counts; a moment older, not.
        ((0, 150, 300, 450, 600), True),
        ((0, 150, 300, 450, 600.001), False),
        ((0, 1, 2, 3, 600), True),
        ((0, 1, 2, 3, 601), False),
        # Four recent ones and any number of old ones: not five within ten minutes.
        ((0, 10, 20, 30, 700, 800, 900, 1000, 5000), False),
        ((600, 0, 300, 450, 150), True),
        # A time after now (another clock slightly ahead) counts as recent.
        ((-1, -1, 0, 0, 0), True),
    ],
)
def test_stopped_after(ages: tuple[float, ...], stopped: bool) -> None:
    assert stopped_after([NOW - age for age in ages], NOW) is stopped


def test_the_defaults_are_five_in_ten_minutes() -> None:
    assert (UNEXPECTED_TERMINATION_LIMIT, UNEXPECTED_TERMINATION_WINDOW_S) == (5, 600.0)


def test_a_window_that_slides_past_the_first_termination() -> None:
    times = [0.0, 150.0, 300.0, 450.0, 600.0]
    assert stopped_after(times, now=600.0)
    assert not stopped_after(times, now=600.5)


@pytest.mark.parametrize(
    ("times", "now", "limit", "window_s", "stopped"),
    [
        ([100.0, 110.0], 110.0, 2, 10.0, True),
        ([100.0, 110.0], 110.5, 2, 10.0, False),
        ([100.0], 100.0, 1, 10.0, True),
        ([100.0, 105.0, 109.0], 110.0, 4, 10.0, False),
    ],
)
def test_limit_and_window_are_parameters(times: list[float], now: float, limit: int, window_s: float, stopped: bool) -> None:
    assert stopped_after(times, now, limit=limit, window_s=window_s) is stopped


def test_recent_terminations_keeps_those_that_still_count_in_order() -> None:
    times = [NOW - 700, NOW - 600, NOW - 300, NOW - 601, NOW, NOW + 1]
    assert recent_terminations(times, NOW) == [NOW - 600, NOW - 300, NOW, NOW + 1]
    assert recent_terminations(times, NOW, window_s=300) == [NOW - 300, NOW, NOW + 1]
