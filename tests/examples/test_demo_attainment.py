"""The demo summary's attainment (app/examples/demo_attainment.py): its 10 s intervals from the demo's own work
records, the first 30 s and the QUIESCE until its backlog was served left out, and when each class missed."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.examples import demo_attainment
from app.examples.demo_attainment import attainment, first_period_goals, requests_of
from app.policy.schemas import AverageGoal, PercentileGoal, VelocityGoal

T0 = 1_800_000_000.0  # the demo's start, epoch seconds


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def online(inserted: float, waited: float, worked: float = 0.05) -> tuple[str, float, float, float]:
    return ("ONLINE", T0 + inserted, T0 + inserted + waited, T0 + inserted + waited + worked)


def test_each_class_is_judged_by_its_first_periods_goal() -> None:
    goals = first_period_goals()
    assert goals["ONLINE"] == PercentileGoal(type="percentile", percentile=90, response_time_ms=250)
    assert goals["BATCH"] == AverageGoal(type="average", response_time_ms=2000)
    assert goals["REPORTS"] == VelocityGoal(type="velocity", velocity=40)


def test_only_the_demos_requests_of_their_first_period() -> None:
    row = {"service_class": "BATCH", "queue_manager_id": 7, "period": 1, "inserted_at": at(1), "selected_at": at(2), "ended_at": at(3)}
    rows = [row, row | {"queue_manager_id": 8}, row | {"period": 2}, row | {"selected_at": None, "ended_at": at(5)}]
    assert requests_of(rows, 7) == [("BATCH", T0 + 1, T0 + 2, T0 + 3), ("BATCH", T0 + 1, T0 + 5, T0 + 5)]


def test_the_first_30_s_and_the_quiesce_until_its_backlog_was_served_are_left_out() -> None:
    # ONLINE ends a request every second, quickly, but for one slow interval at 40 s; quiesced from 95 s, resumed at
    # 105 s, its backlog served by 112.5 s.
    requests = [online(s + 0.1, 0.01) for s in range(0, 150) if not 95 <= s < 105]
    requests += [online(s + 0.1, 1.0) for s in range(40, 50)]  # 1 s waits: the 90th percentile far over 250 ms
    requests += [online(s + 0.1, 112.5 - s - 0.15) for s in range(95, 105)]  # queued while quiesced, served by 112.5 s
    found = attainment(requests, T0, 150, at(95), at(105))
    assert found.left_out == pytest.approx((95, 112.5), abs=1e-3)
    offsets = [i.offset_s for i in found.classes["ONLINE"].intervals]
    assert offsets == [30, 40, 50, 60, 70, 80, 120, 130, 140]  # not 0-20, nor 90-110 (they touch 95-112.5)
    assert (found.classes["ONLINE"].met, found.classes["ONLINE"].counted) == (8, 9)
    lines = found.lines()
    assert "the first 30 s and 1:35-1:52, the QUIESCE until its backlog was served, left out" in lines[0]
    assert lines[1].split() == ["ONLINE", "0.89", "(8", "of", "9", "intervals;", "missed", "at", "0:40)"]
    assert lines[2].split()[:2] == ["BATCH", "-"]  # no BATCH work at all: nothing counted


def test_without_a_quiesce_only_the_first_30_s_are_left_out_and_waiting_without_an_end_is_a_miss() -> None:
    requests = [online(s, 0.01) for s in range(0, 60)] + [("BATCH", T0 + 35, math.inf, math.inf)]
    found = attainment(requests, T0, 60, None, None)
    assert found.left_out is None
    assert [i.pi for i in found.classes["BATCH"].intervals] == [math.inf, math.inf, math.inf]
    assert found.classes["ONLINE"].share == 1.0 and found.classes["BATCH"].share == 0.0
    assert "missed at 0:30, 0:40, 0:50" in found.lines()[2]
    assert "the first 30 s left out" in found.lines()[0]


async def test_no_records_directory_no_attainment(tmp_path: Path) -> None:
    assert await demo_attainment.read_requests(tmp_path / "absent", 1, 10) is None
