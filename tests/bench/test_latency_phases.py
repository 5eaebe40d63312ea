"""bench/_latency_phases.py: a request's insert→select latency as consecutive phases, from the client's times and
the service's timing headers, whichever answer comes first."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _latency_phases import CAME_AFTER, WOKEN, Breakdown, parse


def header(**marks: float) -> str:
    return ",".join(f"{name}={at:.6f}" for name, at in marks.items())


def test_a_header_keeps_the_last_of_each_mark() -> None:
    assert parse("recv=1.5,script_call=2,script_call=3.25,respond=4") == {"recv": 1.5, "script_call": 3.25, "respond": 4.0}
    assert parse(None) == {}


def test_the_phases_of_each_path_add_up_to_the_latency() -> None:
    breakdown = Breakdown()
    insert = header(pid=7, recv=100.001, script_call=100.002, script_reply=100.004, respond=100.005)
    # Request 0 was woken (its select waited); request 1's select came in after its insert, and was answered before
    # the client had the insert's own answer.
    breakdown.inserted(0, 100.000, 100.006, insert)
    breakdown.selected(
        0, 100.011, header(pid=7, recv=99.0, woken=100.003, resumed=100.0035, script_call=100.0036, script_reply=100.009, respond=100.010)
    )
    breakdown.selected(1, 100.010, header(pid=8, recv=100.003, script_call=100.0031, script_reply=100.008, respond=100.009))
    breakdown.inserted(1, 100.000, 100.012, insert)
    figures = breakdown.report()
    assert (figures["requests"], figures["woken_requests"]) == (2, 1)
    for label, phases, latency in (("woken", WOKEN, 11.0), ("came_after", CAME_AFTER, 10.0)):
        spans = figures[label]  # type: ignore[index]
        assert sum(spans[name]["p50"] for name, _, _ in phases) == pytest.approx(latency, abs=0.01)
    assert figures["woken"]["insert script sent → waiter woken (script, publish, pub/sub)"]["p50"] == pytest.approx(1.0)  # type: ignore[index]
    # The slowest 1% of two requests is the slower one: the woken.
    assert figures["tail_from_ms"] == pytest.approx(11.0, abs=0.01)
    assert figures["woken"]["select script (Redis round trip)"]["tail_n"] == 1  # type: ignore[index]
    assert figures["came_after"]["select script (Redis round trip)"]["tail_n"] == 0  # type: ignore[index]
    assert figures["woken_in_inserting_process"] == 1
    assert figures["processes"] == {
        "7": {"inserts": 2, "selects": 1, "slowest_selects": 1},
        "8": {"inserts": 0, "selects": 1, "slowest_selects": 0},
    }


def test_a_request_without_timing_is_left_out() -> None:
    breakdown = Breakdown()
    breakdown.inserted(0, 1.0, 1.002, None)
    breakdown.selected(0, 1.004, None)
    assert breakdown.report() == {}
