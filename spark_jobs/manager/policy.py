"""The parts of a service definition the manager's rules read, as plain frozen dataclasses (pure): goals, server
limits, resource groups. The service reads a definition into its Pydantic models (app/policy/schemas.py), which
check it, and hands the rules these goals and limits (each model's `rule()`; the queues hold a group as their own
`GroupCap`); the what-if job builds them from a definition the service checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# A goal's response time is at most a day; no environment has more servers than this (app/policy/schemas.py).
DAY_MS = 86_400_000
MAX_SERVERS = 10_000


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value!r}")


@dataclass(frozen=True, slots=True)
class AverageGoal:
    type: ClassVar[str] = "average"
    response_time_ms: int

    def __post_init__(self) -> None:
        _check_range("response_time_ms", self.response_time_ms, 1, DAY_MS)


@dataclass(frozen=True, slots=True)
class PercentileGoal:
    type: ClassVar[str] = "percentile"
    percentile: int
    response_time_ms: int

    def __post_init__(self) -> None:
        _check_range("percentile", self.percentile, 1, 99)
        _check_range("response_time_ms", self.response_time_ms, 1, DAY_MS)


@dataclass(frozen=True, slots=True)
class VelocityGoal:
    type: ClassVar[str] = "velocity"
    velocity: int

    def __post_init__(self) -> None:
        _check_range("velocity", self.velocity, 1, 99)


@dataclass(frozen=True, slots=True)
class DiscretionaryGoal:
    type: ClassVar[str] = "discretionary"


Goal = AverageGoal | PercentileGoal | VelocityGoal | DiscretionaryGoal


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """An application environment's server limits: never fewer than `min`, never more than `max` (None: no cap);
    `spread_min` spreads the minimum over the classes rather than giving it to the first."""

    min: int = 0
    max: int | None = None
    spread_min: bool = False

    def __post_init__(self) -> None:
        _check_range("min", self.min, 0, MAX_SERVERS)
        if self.max is not None:
            _check_range("max", self.max, 1, MAX_SERVERS)


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Caps on the requests its classes have selected or begun at once: never more than `max_in_flight` (None: no
    cap); while fewer than `min_in_flight`, its classes go first among their importance."""

    name: str
    max_in_flight: int | None = None
    min_in_flight: int | None = None
