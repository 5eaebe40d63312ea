"""bench/_attainment.py: the per-interval PI and attainment bench/goals.py reports, from (class, inserted, ended)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

# The benchmarks' helpers are modules of bench/, imported as the benchmarks import them.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _attainment import attainment

GOALS = {"FAST": 0.5, "SLOW": 2.0}
T0 = 1_700_000_000.0  # an epoch time, as the work records give


def pis(result, name):
    return [interval.pi for interval in result[name].intervals]


def test_pi_is_the_mean_response_of_the_requests_ended_in_the_interval_over_the_goal() -> None:
    requests = [
        ("FAST", T0 + 0.0, T0 + 0.2),  # interval 0: 0.2 and 0.4 s, mean 0.3 over 0.5 -> 0.6, met
        ("FAST", T0 + 1.0, T0 + 1.4),
        ("FAST", T0 + 5.0, T0 + 6.0),  # interval 1: 1.0 and 0.5 s, mean 0.75 -> 1.5, missed
        ("FAST", T0 + 7.0, T0 + 7.5),
        ("SLOW", T0 + 0.0, T0 + 4.0),  # interval 0: 4 s over 2 -> 2.0, missed
        ("SLOW", T0 + 5.0, T0 + 7.0),  # interval 1: exactly the goal -> 1.0, met
    ]
    result = attainment(requests, GOALS, T0, T0 + 10, 5.0)
    assert pis(result, "FAST") == pytest.approx([0.6, 1.5])
    assert pis(result, "SLOW") == pytest.approx([2.0, 1.0])
    assert [interval.ended for interval in result["FAST"].intervals] == [2, 2]
    assert [interval.offset_s for interval in result["FAST"].intervals] == [0.0, 5.0]
    assert result["FAST"].share == 0.5 and result["SLOW"].share == 0.5
    assert (result["FAST"].counted, result["FAST"].met) == (2, 1)


def test_a_request_that_waited_long_counts_where_it_ended_by_its_whole_response() -> None:
    # Inserted before the phase, ended in its second interval: 12 s over a 2 s goal.
    result = attainment([("SLOW", T0 - 2.0, T0 + 10.0)], {"SLOW": 2.0}, T0, T0 + 15, 5.0)
    assert pis(result, "SLOW") == [math.inf, math.inf, 6.0]  # queued throughout, ended in the third
    assert result["SLOW"].share == 0.0


def test_work_queued_or_in_flight_but_none_ended_is_a_miss() -> None:
    requests = [
        ("FAST", T0 + 1.0, T0 + 1.1),  # interval 0 met
        ("FAST", T0 + 4.0, T0 + 11.0),  # inserted in interval 0, in flight through interval 1, ended in 2
    ]
    result = attainment(requests, GOALS, T0, T0 + 15, 5.0)
    assert pis(result, "FAST") == pytest.approx([0.2, math.inf, 14.0])
    assert result["FAST"].share == pytest.approx(1 / 3)


def test_a_request_not_ended_is_queued_in_every_interval_after_its_insert() -> None:
    result = attainment([("FAST", T0 + 6.0, math.inf)], GOALS, T0, T0 + 15, 5.0)
    assert pis(result, "FAST") == [None, math.inf, math.inf]
    assert result["FAST"].share == 0.0


def test_an_interval_without_any_work_of_the_class_is_left_out() -> None:
    requests = [("FAST", T0 + 0.5, T0 + 0.7), ("FAST", T0 + 11.0, T0 + 11.1)]
    result = attainment(requests, GOALS, T0, T0 + 15, 5.0)
    assert pis(result, "FAST") == pytest.approx([0.4, None, 0.2])
    assert (result["FAST"].counted, result["FAST"].met, result["FAST"].share) == (2, 2, 1.0)
    # A class with no work in the phase at all: every interval left out, its attainment unknown.
    assert pis(result, "SLOW") == [None, None, None]
    assert result["SLOW"].share is None


def test_boundaries_an_interval_holds_its_start_not_its_end() -> None:
    requests = [
        ("FAST", T0 + 4.0, T0 + 5.0),  # ends on interval 1's start: in interval 1, not 0
        ("FAST", T0 + 9.0, T0 + 10.0),  # ends on interval 2's start (outside the phase's whole intervals)
    ]
    result = attainment(requests, GOALS, T0, T0 + 10, 5.0)
    # Interval 0: the first request in flight, none ended: a miss. Interval 1: the first ended (1 s / 0.5), the
    # second in flight.
    assert pis(result, "FAST") == pytest.approx([math.inf, 2.0])
    # Ended exactly at an interval's start: work there (not ended before its start) and ended in it.
    only = attainment([("FAST", T0 + 4.9, T0 + 5.0)], GOALS, T0, T0 + 10, 5.0)
    assert pis(only, "FAST") == pytest.approx([math.inf, 0.2])
    # Inserted exactly at an interval's end: not work of that interval.
    later = attainment([("FAST", T0 + 5.0, T0 + 5.1)], GOALS, T0, T0 + 10, 5.0)
    assert pis(later, "FAST") == pytest.approx([None, 0.2])


def test_only_intervals_wholly_inside_the_phase() -> None:
    requests = [("FAST", T0 + 13.0, T0 + 13.1)]  # in the phase, but in its last, partial interval
    result = attainment(requests, GOALS, T0, T0 + 14.9, 5.0)
    assert [interval.offset_s for interval in result["FAST"].intervals] == [0.0, 5.0]
    assert result["FAST"].share is None
    exact = attainment(requests, GOALS, T0, T0 + 15.0, 5.0)  # the phase's end on an interval's end: included
    assert [interval.offset_s for interval in exact["FAST"].intervals] == [0.0, 5.0, 10.0]
    assert exact["FAST"].share == pytest.approx(1.0)
    assert attainment(requests, GOALS, T0, T0 + 4.0, 5.0)["FAST"].intervals == ()  # a phase shorter than one interval


def test_requests_of_other_classes_are_ignored_and_the_interval_must_be_positive() -> None:
    result = attainment([("OTHER", T0, T0 + 100.0)], {"FAST": 0.5}, T0, T0 + 5, 1.0)
    assert set(result) == {"FAST"} and pis(result, "FAST") == [None] * 5
    with pytest.raises(ValueError):
        attainment([], GOALS, T0, T0 + 5, 0.0)
