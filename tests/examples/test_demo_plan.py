"""The demo's plan and its count of servers (pure): the phases' mixes in turn, and what became of each connection."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.examples.demo_plan import MIX_CYCLE, ONLINE_SURGE, REPORTS_SURGE, STEADY, phases
from app.examples.demo_report import OperatorTimes, ServerCounts, ServersAtStart, count_servers


def test_the_mix_changes_every_phase_surges_first_and_the_last_phase_ends_with_the_demo() -> None:
    plan = phases(duration_s=150, phase_s=60)
    assert [(p.number, p.start_s, p.end_s, p.mix) for p in plan] == [
        (1, 0, 60, REPORTS_SURGE),
        (2, 60, 120, ONLINE_SURGE),
        (3, 120, 150, STEADY),
    ]
    assert [p.mix for p in phases(duration_s=4 * 60, phase_s=60)] == [*MIX_CYCLE, REPORTS_SURGE]
    # The least important class surges first, then the most important.
    assert REPORTS_SURGE.rates["REPORTS"] > max(ONLINE_SURGE.rates["REPORTS"], STEADY.rates["REPORTS"])
    assert ONLINE_SURGE.rates["ONLINE"] > max(REPORTS_SURGE.rates["ONLINE"], STEADY.rates["ONLINE"])


def _at(second: int) -> str:
    return datetime(2026, 11, 21, 12, 0, second, tzinfo=UTC).isoformat()


def _server(id: int, instance: str | None, state: str = "active", reason: str | None = None, ended: int | None = None) -> dict[str, Any]:
    return {
        "id": id,
        "instance": instance,
        "state": state,
        "disconnect_reason": reason,
        "disconnected_at": None if ended is None else _at(ended),
    }


def test_servers_are_counted_as_started_retired_ended_by_the_quiesce_or_lost() -> None:
    operator = OperatorTimes(quiesce_at=datetime.fromisoformat(_at(20)), resume_at=datetime.fromisoformat(_at(30)))
    connections = [
        _server(1, "PAYROLL-1-1", "disconnected", "requested", ended=2),  # ended before the demo: not its
        _server(2, "PAYROLL-1-2", "disconnected", "requested", ended=10),  # connected as it began, retired during it
        _server(3, "PAYROLL-1-3", "disconnected", "requested", ended=12),  # retired
        _server(4, "PAYROLL-1-4", "disconnected", "requested", ended=21),  # ended by the QUIESCE
        _server(5, "PAYROLL-1-5", "disconnected", "exited", ended=25),  # its process died
        _server(6, None),  # started by hand: not the launcher's
        _server(7, "PAYROLL-1-7"),
        _server(8, "PAYROLL-1-7"),  # the same process connected again
    ]
    at_start = ServersAtStart(newest_id=2, connected=frozenset({2}))
    assert count_servers(connections, at_start, operator) == ServerCounts(started=4, retired=2, quiesced=1, lost=1, connected=3)


def test_a_server_ending_after_an_unanswered_quiesce_counts_as_ended_by_it() -> None:
    operator = OperatorTimes(quiesce_at=datetime.fromisoformat(_at(20)))
    ended = [_server(3, "PAYROLL-1-3", "disconnected", "requested", ended=50)]
    assert count_servers(ended, ServersAtStart(2, frozenset()), operator).quiesced == 1
