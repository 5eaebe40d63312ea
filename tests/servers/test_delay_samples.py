"""The delay samples' counts (app/servers/delay_samples.py), pure: one environment's sample from its figures, the counts
per minute and over the window, and their percentages; the periods' ends as the read takes them."""

from __future__ import annotations

import pytest

from app.queues.delay_figures import DelayFigures, period_ends
from app.servers.delay_samples import MINUTE_MS, SLOT_MS, DelayBook, SampledClass, added, place_sample, shares
from app.servers.delays import STATES
from spark_jobs.manager.goals import period_number

ONLINE, BATCH = SampledClass("ONLINE", 1, 2, False), SampledClass("BATCH", 3, 1, False)


def figures(**changes: object) -> DelayFigures:
    """One server of 2 tasks, both taken: one ONLINE request in its second period, one BATCH; 3 ONLINE and 2 BATCH
    queued, one of the ONLINE ones given back."""
    base = {
        "now_ms": 0,
        "servers": 1,
        "worker_tasks": 2,
        "held": 2,
        "wanted": 1,
        "queued": {"ONLINE": 3, "BATCH": 2},
        "redelivered": {"ONLINE": 1, "BATCH": 0},
        "held_by_period": {("ONLINE", 2): 1, ("BATCH", 1): 1},
    }
    return DelayFigures(**(base | changes))  # type: ignore[arg-type]


def test_each_class_period_of_an_environment() -> None:
    assert place_sample(figures(), [ONLINE, BATCH], holds_work=False) == {
        ("ONLINE", 1): {"redelivery": 1, "busy_higher": 2},  # ONLINE work holds a task: equal importance
        ("ONLINE", 2): {"using": 1},  # served in the period its time since insert is in; the queued are in the first
        ("BATCH", 1): {"using": 1, "busy_higher": 2},
    }


def test_busy_with_less_important_work_only() -> None:
    sample = place_sample(figures(held_by_period={("BATCH", 1): 2}), [ONLINE, BATCH], holds_work=False)
    assert sample[("ONLINE", 1)] == {"redelivery": 1, "busy_lower": 2}
    assert sample[("BATCH", 1)] == {"using": 2, "busy_higher": 2}


def test_the_environment_s_state_and_the_group_s_cap_come_first() -> None:
    held_back = place_sample(figures(), [ONLINE, BATCH], holds_work=True)
    assert held_back[("ONLINE", 1)] == {"environment_state": 3} and held_back[("BATCH", 1)] == {"using": 1, "environment_state": 2}
    capped = place_sample(figures(), [ONLINE, SampledClass("BATCH", 3, 1, True)], holds_work=False)
    assert capped[("BATCH", 1)] == {"using": 1, "group_cap": 2}


@pytest.mark.parametrize(
    ("changes", "state"),
    [
        ({"servers": 0, "worker_tasks": 0, "held": 0, "held_by_period": {}}, "no_server"),
        ({"wanted": 2}, "servers_starting"),
        ({"worker_tasks": 3}, "unknown"),  # a task is free: about to be selected
    ],
)
def test_servers(changes: dict[str, object], state: str) -> None:
    assert place_sample(figures(**changes), [BATCH], holds_work=False)[("BATCH", 1)].get(state) == 2


def test_a_class_the_policy_dropped_is_not_sampled() -> None:
    sample = place_sample(figures(held_by_period={("GONE", 1): 2}), [ONLINE], holds_work=False)
    assert sample == {("ONLINE", 1): {"redelivery": 1, "unknown": 2}, ("ONLINE", 2): {}}


def test_minutes_are_taken_once_over() -> None:
    book = DelayBook(window_ms=60_000)
    for at in (0, 250, MINUTE_MS - 1, MINUTE_MS + 10):
        book.add(at, "PAYROLL", "LOCAL", {("ONLINE", 1): {"no_server": 2}})
    assert book.take_minutes(MINUTE_MS + 10) == [(0, ("PAYROLL", "LOCAL", "ONLINE", 1), added(None, {"no_server": 6}, samples=3))]
    assert book.take_minutes(MINUTE_MS + 10) == []
    assert book.take_minutes(None) == [(MINUTE_MS, ("PAYROLL", "LOCAL", "ONLINE", 1), added(None, {"no_server": 2}))]


def test_the_window_sums_its_slots_of_one_place() -> None:
    book = DelayBook(window_ms=30_000)
    book.add(0, "PAYROLL", "LOCAL", {("ONLINE", 1): {"using": 1}})
    book.add(SLOT_MS * 3, "PAYROLL", "LOCAL", {("ONLINE", 1): {"no_server": 1}})
    book.add(SLOT_MS * 3, "OTHER", "LOCAL", {("ONLINE", 1): {"no_server": 5}})
    assert book.window("PAYROLL", "LOCAL", SLOT_MS * 4) == {("ONLINE", 1): added(added(None, {"using": 1}), {"no_server": 1})}
    book.add(SLOT_MS * 8, "PAYROLL", "LOCAL", {("ONLINE", 1): {"busy_lower": 1}})  # the first slot leaves the window
    assert book.window("PAYROLL", "LOCAL", SLOT_MS * 8) == {("ONLINE", 1): added(added(None, {"no_server": 1}), {"busy_lower": 1})}


def test_shares_of_every_request_counted() -> None:
    counts = added(added(None, {"using": 1, "no_server": 2}), {"unknown": 1})
    result = shares(counts)
    assert (result.samples, result.using_pct) == (2, 25.0)
    assert result.delay_pct["no_server"] == 50.0 and sum(result.delay_pct.values()) == 50.0
    assert set(result.delay_pct) == set(STATES[1:-1])
    assert shares(None).using_pct is None and shares(added(None, {})).using_pct is None


@pytest.mark.parametrize("durations", [[None], [1000], [1000, None], [1000, 2000, None], [1000, 2000], [500, None, None]])
def test_period_ends_are_period_number_s_boundaries(durations: list[int | None]) -> None:
    ends = [int(end) for end in period_ends(durations).split(",") if end]
    for elapsed in range(0, 4000, 250):
        assert 1 + sum(elapsed >= end for end in ends) == period_number(durations, elapsed)
