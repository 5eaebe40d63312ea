"""What the what-if simulation reads and what it gives back (pure, plain data): one application environment's
arrivals and its part of the candidate policy in; each request as served, and per class period and per interval
the PI, the ended count and the servers, out."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from spark_jobs.manager.policy import Goal, ResourceGroup, ServerLimits


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request as the records give it: when it was inserted (seconds from the replay's start), its service class
    (classified under the candidate), how long it executed, and whether it is dependent work."""

    at_s: float
    service_class: str
    execution_s: float
    dependent: bool = False


@dataclass(frozen=True, slots=True)
class Arrivals:
    """Arrivals as columns: a day of millions kept compact (8 to 17 bytes a request, no object each). `classes` names
    the service classes by the index `service_class` holds."""

    classes: list[str] = field(default_factory=list)
    at_s: array[float] = field(default_factory=lambda: array("d"))
    service_class: array[int] = field(default_factory=lambda: array("H"))
    execution_s: array[float] = field(default_factory=lambda: array("d"))
    dependent: bytearray = field(default_factory=bytearray)
    _index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, arrivals: Iterable[Arrival]) -> Arrivals:
        columns = cls()
        for arrival in arrivals:
            columns.add(arrival.at_s, arrival.service_class, arrival.execution_s, arrival.dependent)
        return columns

    def class_index(self, name: str) -> int:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self.classes)
            self.classes.append(name)
        return index

    def add(self, at_s: float, service_class: str, execution_s: float, dependent: bool = False) -> None:
        self.at_s.append(at_s)
        self.service_class.append(self.class_index(service_class))
        self.execution_s.append(execution_s)
        self.dependent.append(dependent)

    def __len__(self) -> int:
        return len(self.at_s)


@dataclass(frozen=True, slots=True)
class Period:
    goal: Goal
    importance: int | None = None
    duration_ms: int | None = None  # None: the last, open-ended


@dataclass(frozen=True, slots=True)
class ServiceClass:
    name: str
    periods: tuple[Period, ...]
    resource_group: str | None = None

    def __post_init__(self) -> None:
        if not self.periods:
            raise ValueError(f"{self.name}: a service class has at least one period")


@dataclass(frozen=True, slots=True)
class Environment:
    """An application environment under the candidate policy: its service classes (SYSOTHER among them if work of it
    arrives), server limits and resource groups; the worker tasks of each server; and whether the service starts its
    servers (a start command, launching on: every surplus server retired) or others do (only those beyond `max`)."""

    classes: tuple[ServiceClass, ...]
    limits: ServerLimits = ServerLimits()
    resource_groups: tuple[ResourceGroup, ...] = ()
    worker_tasks: int = 1
    starts_servers: bool = True

    def __post_init__(self) -> None:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"service class names must be unique, got {names}")
        groups = {g.name for g in self.resource_groups}
        unknown = sorted({c.resource_group for c in self.classes if c.resource_group is not None} - groups)
        if unknown:
            raise ValueError(f"classes name resource groups the environment does not have: {unknown}")
        if self.worker_tasks < 1:
            raise ValueError(f"worker_tasks must be >= 1, got {self.worker_tasks}")


@dataclass(frozen=True, slots=True)
class ManagerSettings:
    """The manager's settings the replay runs with (WLM_GOAL_INTERVAL_SECONDS, WLM_GOAL_WINDOW_SECONDS,
    WLM_BLOCKED_PROMOTION_SECONDS, WLM_BLOCKED_PROMOTION_SHARE): a decision every `interval_s`, from the requests
    ended within the last `window_s`, draining a backlog by the next decision."""

    interval_s: float = 10.0
    window_s: float = 60.0
    promotion_s: float = 20.0
    promotion_share: float = 0.005

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and self.window_s > 0 and self.promotion_s > 0 and 0 < self.promotion_share <= 1):
            raise ValueError(f"interval, window and promotion time must be > 0 and the share in (0, 1]: {self}")


@dataclass(frozen=True, slots=True)
class Served:
    """One arrival as the replay served it: selected and ended (seconds from the start; None: not by the replay's
    end), the period its response time reached, and whether its select was a promotion."""

    service_class: str
    inserted_s: float
    selected_s: float | None
    ended_s: float | None
    period: int | None
    promoted: bool


class ServedColumns(Sequence[Served]):
    """Requests as served, as columns (a day of millions kept compact): each is a `Served` when read. A time not
    reached is NaN in its column; a period not reached, 0."""

    __slots__ = ("classes", "ended_s", "inserted_s", "period", "promoted", "selected_s", "service_class")

    def __init__(
        self,
        classes: Sequence[str],
        service_class: array[int],
        inserted_s: array[float],
        selected_s: array[float],
        ended_s: array[float],
        period: array[int],
        promoted: bytearray,
    ) -> None:
        self.classes = list(classes)
        self.service_class, self.inserted_s, self.selected_s, self.ended_s = service_class, inserted_s, selected_s, ended_s
        self.period, self.promoted = period, promoted

    def __len__(self) -> int:
        return len(self.inserted_s)

    def _one(self, n: int) -> Served:
        selected, ended, period = self.selected_s[n], self.ended_s[n], self.period[n]
        return Served(
            self.classes[self.service_class[n]],
            self.inserted_s[n],
            None if math.isnan(selected) else selected,
            None if math.isnan(ended) else ended,
            period or None,
            bool(self.promoted[n]),
        )

    @overload
    def __getitem__(self, index: int) -> Served: ...
    @overload
    def __getitem__(self, index: slice) -> list[Served]: ...
    def __getitem__(self, index: int | slice) -> Served | list[Served]:
        if isinstance(index, slice):
            return [self._one(n) for n in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._one(index % len(self))

    def __iter__(self) -> Iterator[Served]:
        return (self._one(n) for n in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable columns


@dataclass(frozen=True, slots=True)
class ClassInterval:
    """A service class period over one interval: the requests that ended in it (their count and PI; None: none
    ended, or a goal without one), and whether the class had work of that period queued or in flight in it (work
    and none ended counts as a miss in goal attainment). The servers are the class's, on its first period's row
    only (None on the others): the manager's count for it and the servers homed to it, both averaged over the
    interval, and their connected server-seconds."""

    start_s: float
    service_class: str
    period: int
    ended: int
    pi: float | None
    had_work: bool
    servers_wanted: float | None
    servers_connected: float | None
    server_seconds: float | None
    # The ended requests' response times: average, nearest-rank percentiles, and the 14 buckets of the goal (of the
    # average, for a goal without a response time, as the nightly report has them; None when nothing ended).
    response_avg_ms: float | None = None
    response_p50_ms: float | None = None
    response_p90_ms: float | None = None
    response_p99_ms: float | None = None
    buckets: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class EnvironmentInterval:
    """The environment over one interval: the manager's total, the servers connected (homed or not, retiring or
    not) averaged over the interval, and their server-seconds."""

    start_s: float
    servers_wanted: float
    servers_connected: float
    server_seconds: float


@dataclass(frozen=True, slots=True)
class Replay:
    served: ServedColumns  # in the order of the arrivals given
    classes: tuple[ClassInterval, ...]  # by interval, then in the environment's class order, then period
    environment: tuple[EnvironmentInterval, ...]
    decisions: int
    servers_started: int
    servers_retired: int
    # The same figures over the whole replay as one interval (the report's whole-day rows).
    whole_classes: tuple[ClassInterval, ...] = ()
    whole_environment: tuple[EnvironmentInterval, ...] = ()
