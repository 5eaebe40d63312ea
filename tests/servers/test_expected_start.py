"""The expected start of a queued request (app/servers/expected_start.py), pure: worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.servers.expected_start import StartBasis, busy_with_more_important, class_execution_ms, expected_wait_ms
from app.servers.schemas import PeriodPerformance


def basis(**changes: float) -> StartBasis:
    fields = dict(ahead=9, execution_ms=200.0, worker_tasks=4, free_worker_tasks=0, servers_connected=2, servers_wanted=2,
                  busy_with_more_important=0.0) | changes  # fmt: skip
    return StartBasis(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, 500.0),  # 9 ahead and itself on 4 tasks of 200 ms: 10 x 200 / 4
        ({"ahead": 0}, 50.0),  # the next: when the first of 4 busy tasks is done, 200 / 4 on average
        ({"free_worker_tasks": 2, "ahead": 1}, 0.0),  # a free task takes it at once
        ({"free_worker_tasks": 2}, 400.0),  # two go at once: 8 x 200 / 4
        ({"servers_wanted": 4}, 250.0),  # twice the servers wanted: their tasks too, 10 x 200 / 8
        ({"servers_wanted": 1}, 500.0),  # fewer wanted than connected: those connected serve until they go
        ({"busy_with_more_important": 1.5}, 800.0),  # 2.5 tasks left for the class: 10 x 200 / 2.5
        ({"execution_ms": None}, None),  # nothing of the class ended in the window
        ({"servers_connected": 0, "worker_tasks": 0}, None),
        ({"busy_with_more_important": 4.0}, None),  # more important work keeps every task
    ],
)
def test_expected_wait(changes: dict[str, float], expected: float | None) -> None:
    assert expected_wait_ms(basis(**changes)) == expected


def period(service_class: str, number: int, ended: int, execution_ms: float | None) -> PeriodPerformance:
    return PeriodPerformance(
        service_class=service_class, period=number, application_environment="PAYROLL", node="LOCAL", importance=1, goal={},
        window_seconds=60, evaluated_at=datetime(2026, 11, 27, tzinfo=UTC), ended=ended, ended_per_second=ended / 60,
        avg_response_ms=None, p50_response_ms=None, p90_response_ms=None, p99_response_ms=None, avg_queue_ms=None,
        avg_execution_ms=execution_ms, velocity=None, distribution=None, performance_index=None, goal_met=None,
        goal_met_share=None, queued=0,
    )  # fmt: skip


def test_a_classs_execution_time_is_its_periods_weighted_by_what_ended() -> None:
    periods = [period("BATCH", 1, 30, 100.0), period("BATCH", 2, 10, 500.0), period("ONLINE", 1, 60, 10.0), period("BATCH", 3, 0, None)]
    assert class_execution_ms(periods, "BATCH") == 200.0  # (30 x 100 + 10 x 500) / 40
    assert class_execution_ms(periods, "REPORTS") is None


def test_the_tasks_more_important_classes_keep_busy() -> None:
    periods = [period("ONLINE", 1, 60, 500.0), period("BATCH", 1, 120, 1000.0), period("REPORTS", 1, 600, 100.0)]
    tiers = {"ONLINE": 0, "BATCH": 1, "REPORTS": 2}
    assert busy_with_more_important(periods, tiers, "ONLINE") == 0.0
    assert busy_with_more_important(periods, tiers, "BATCH") == 0.5  # 1/s for 0.5 s
    assert busy_with_more_important(periods, tiers, "REPORTS") == 2.5  # and 2/s for 1 s
    assert busy_with_more_important(periods, tiers, "SYSOTHER") == 0.0  # a class the policy does not rank
