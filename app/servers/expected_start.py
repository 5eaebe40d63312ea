"""When a queued request is expected to start (pure): from how many requests of its class queue are ahead of it, its
class's recent service (the goal evaluation's window) and the servers wanted.

Its environment's worker tasks (those of the servers wanted, when the manager wants more than are connected) serve
its class at the class's recent mean execution time, less the tasks that more important classes keep busy (their
recent end rate times their mean execution time: Little's law). A free task takes the next request at once; once
none is free, the request starts when the requests ahead of it and one more have been taken. None where there is no
basis: nothing of the class ended in the window, no server connected, or more important work keeps every task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.servers.schemas import PeriodPerformance


@dataclass(frozen=True, slots=True)
class StartBasis:
    ahead: int  # requests of its class queue ahead of it
    execution_ms: float | None  # its class's recent mean execution time (None: nothing ended in the window)
    worker_tasks: int  # of its environment's connected servers (on its node)
    free_worker_tasks: int
    servers_connected: int
    servers_wanted: int  # the manager's latest decision (0: none made yet)
    busy_with_more_important: float  # worker tasks more important classes keep busy, on average


def expected_wait_ms(basis: StartBasis) -> float | None:
    """How long until it is selected; None without a basis."""
    if basis.execution_ms is None or basis.servers_connected == 0 or basis.worker_tasks == 0:
        return None
    if basis.ahead < basis.free_worker_tasks:
        return 0.0
    servers = max(basis.servers_wanted, basis.servers_connected)
    tasks = basis.worker_tasks * servers / basis.servers_connected - basis.busy_with_more_important
    if tasks <= 0:
        return None
    return (basis.ahead - basis.free_worker_tasks + 1) * basis.execution_ms / tasks


def class_execution_ms(periods: Iterable[PeriodPerformance], service_class: str) -> float | None:
    """A class's recent mean execution time over its periods (weighted by what ended in each); None if none ended."""
    ended = total_ms = 0.0
    for period in periods:
        if period.service_class == service_class and period.avg_execution_ms is not None and period.ended:
            ended += period.ended
            total_ms += period.ended * period.avg_execution_ms
    return total_ms / ended if ended else None


def busy_with_more_important(periods: Iterable[PeriodPerformance], tiers: Mapping[str, int], service_class: str) -> float:
    """The worker tasks kept busy, on average, by classes more important than `service_class` (a lower tier)."""
    mine = tiers.get(service_class)
    if mine is None:
        return 0.0
    return sum(
        period.ended_per_second * period.avg_execution_ms / 1000
        for period in periods
        if period.avg_execution_ms is not None and tiers.get(period.service_class, mine) < mine
    )
