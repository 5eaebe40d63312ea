"""Shared by the benchmarks: goal attainment over time, computed from the requests themselves rather than read from
the manager. A phase is cut into intervals of equal length from its start; the performance index (PI) of a class in
one interval is that of an average response time goal over the requests of the class that ENDED in it: their mean
response time (end - insert) divided by the goal. An interval in which the class had work, queued or in flight
(inserted before the interval's end and not ended before its start), but none of it ended is a miss (PI infinity);
one in which the class had no work at all is left out. A class's attainment is the share of its counted intervals
whose PI is at most 1: a PI read once at a phase's end says nothing of how long a class missed before."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """One interval of a class: its start, seconds after the phase's; its PI (None: the class had no work in it, so it
    is left out; math.inf: work but no end); how many of the class's requests ended in it."""

    offset_s: float
    pi: float | None
    ended: int


@dataclass(frozen=True)
class ClassAttainment:
    """A class's intervals in one phase, and the share of those counted (PI not None) whose PI is at most 1; None
    when none counted."""

    intervals: tuple[Interval, ...]

    @property
    def counted(self) -> int:
        return sum(interval.pi is not None for interval in self.intervals)

    @property
    def met(self) -> int:
        return sum(interval.pi is not None and interval.pi <= 1 for interval in self.intervals)

    @property
    def share(self) -> float | None:
        return self.met / self.counted if self.counted else None


def attainment(
    requests: Iterable[tuple[str, float, float]],
    goals_s: Mapping[str, float],
    phase_start: float,
    phase_end: float,
    interval_s: float,
) -> dict[str, ClassAttainment]:
    """Per class of `goals_s` (class: average response time goal, seconds), its intervals and attainment in the
    phase [phase_start, phase_end): the intervals [phase_start + k * interval_s, phase_start + (k + 1) * interval_s)
    that lie wholly inside it. `requests`: (class, inserted, ended) in seconds on one clock (the epoch); a request
    not ended (yet) has ended = math.inf, so it is queued in every interval after its insert. Requests of classes
    not in `goals_s` are ignored."""
    if interval_s <= 0:
        raise ValueError(f"interval_s must be positive, not {interval_s}")
    by_class: dict[str, list[tuple[float, float]]] = {name: [] for name in goals_s}
    for name, inserted, ended in requests:
        if name in by_class:
            by_class[name].append((inserted, ended))
    bounds = []
    k = 0
    # Each bound from the phase's start, not by adding up: k * interval_s does not drift.
    while (end := phase_start + (k + 1) * interval_s) <= phase_end:
        bounds.append((k * interval_s, phase_start + k * interval_s, end))
        k += 1
    result = {}
    for name, goal in goals_s.items():
        intervals = []
        for offset, start, end in bounds:
            responses = [ended - inserted for inserted, ended in by_class[name] if start <= ended < end]
            if responses:
                pi: float | None = sum(responses) / len(responses) / goal
            elif any(inserted < end and ended >= start for inserted, ended in by_class[name]):
                pi = math.inf
            else:
                pi = None
            intervals.append(Interval(offset, pi, len(responses)))
        result[name] = ClassAttainment(tuple(intervals))
    return result
