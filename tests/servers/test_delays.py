"""A queued request's delay cause (app/servers/delays.py), pure: every combination of the facts, each answered by the
first cause in the issue's order whose condition holds, and each cause reached on its own; a queue's sample, each of its
requests counted in its own request's state."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import pytest

from app.servers.delays import STATES, DelayCause, DelayFacts, delay_cause, queue_states
from spark_jobs.contract.delay_samples import STATE_COLUMNS

# Each cause with its condition, in the order they are tried (issue 39, point 1).
CONDITIONS: list[tuple[DelayCause, Callable[[DelayFacts], bool]]] = [
    (DelayCause.ENVIRONMENT_STATE, lambda f: f.environment_holds_work),
    (DelayCause.REDELIVERY, lambda f: f.delivered_before),
    (DelayCause.GROUP_CAP, lambda f: f.group_at_cap),
    (DelayCause.NO_SERVER, lambda f: f.servers_connected == 0),
    (DelayCause.SERVERS_STARTING, lambda f: 0 < f.servers_connected < f.servers_wanted),
    (DelayCause.BUSY_HIGHER, lambda f: f.servers_connected > 0 and f.free_worker_tasks == 0 and f.holding_equal_or_higher),
    (DelayCause.BUSY_LOWER, lambda f: f.servers_connected > 0 and f.free_worker_tasks == 0 and f.holding_lower),
]
FLAGS = (False, True)
ALL_FACTS = [
    DelayFacts(environment, delivered, capped, connected, wanted, free, higher, lower)
    for environment, delivered, capped, connected, wanted, free, higher, lower in itertools.product(
        FLAGS, FLAGS, FLAGS, (0, 1, 3), (0, 1, 3, 5), (0, 1, 4), FLAGS, FLAGS
    )
]


def test_the_order_is_the_issues() -> None:
    assert [cause.value for cause, _ in CONDITIONS] == [
        "environment_state", "redelivery", "group_cap", "no_server", "servers_starting", "busy_higher", "busy_lower",
    ]  # fmt: skip
    assert list(DelayCause) == [cause for cause, _ in CONDITIONS]


def test_every_combination_is_the_first_cause_that_applies() -> None:
    wrong = [
        (facts, delay_cause(facts), expected)
        for facts in ALL_FACTS
        if delay_cause(facts) is not (expected := next((cause for cause, holds in CONDITIONS if holds(facts)), None))
    ]
    assert wrong == [] and len(ALL_FACTS) == 1152


@pytest.mark.parametrize("cause", list(DelayCause))
def test_each_cause_is_reached(cause: DelayCause) -> None:
    assert any(delay_cause(facts) is cause for facts in ALL_FACTS)


def test_none_while_a_worker_task_is_free_of_servers_enough() -> None:
    idle = DelayFacts(False, False, False, servers_connected=2, servers_wanted=2, free_worker_tasks=1, holding_equal_or_higher=True,
                      holding_lower=True)  # fmt: skip
    assert delay_cause(idle) is None


@pytest.mark.parametrize("facts", ALL_FACTS[::7])
@pytest.mark.parametrize(("queued", "redelivered"), [(0, 0), (3, 0), (3, 1), (3, 3), (2, 5), (2, -1)])
def test_a_queue_s_states_are_each_request_s(facts: DelayFacts, queued: int, redelivered: int) -> None:
    """A queue's sample counts each of its queued requests in the state delay_cause gives it, served ones as using."""
    expected: dict[str, int] = {"using": 4}
    for n in range(queued):
        cause = delay_cause(replace(facts, delivered_before=n < redelivered))
        state = "unknown" if cause is None else cause.value
        expected[state] = expected.get(state, 0) + 1
    assert queue_states(facts, 4, queued, redelivered) == expected
    assert sum(queue_states(facts, 0, queued, redelivered).values()) == queued


def test_the_states_are_the_sample_columns() -> None:
    assert STATES == ("using", *(c.value for c in DelayCause), "unknown") == STATE_COLUMNS
