"""Goal attainment over time, computed from the requests themselves rather than read from the manager (pure): shared
by `wlm demo`'s summary and the benchmarks (bench/_attainment.py).

A span is cut into intervals of equal length from its start. A class's performance index (PI) in one interval is
the PI the service would give a window of the class's requests that ENDED in it (spark_jobs/manager/goals.py `evaluate`,
through a judge per class: `goal_judge`). An interval in which the class had work, queued or in flight (inserted
before the interval's end and not ended before its start), but none of it ended is a miss (PI infinity); one in
which the class had no work at all is left out. A class's attainment is the share of its counted intervals whose
PI is at most 1: a PI read once says nothing of how long a class missed before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.policy.schemas import Goal
from spark_jobs.manager.goals import evaluate

# One ended request as a judge sees it: (response, queue, execution), in seconds.
Sample = tuple[float, float, float]
# The PI of the requests of a class that ended in one interval (at least one); None: unknown.
Judge = Callable[[Sequence[Sample]], float | None]


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


def goal_judge(goal: Goal) -> Judge:
    """The PI the service gives a window of these requests under `goal` (spark_jobs/manager/goals.py `evaluate`)."""
    rule = goal.rule()

    def judge(samples: Sequence[Sample]) -> float | None:
        # In milliseconds, as the service's samples; a clock's rounding must not make a duration negative.
        return evaluate(rule, [(max(0.0, r * 1000), max(0.0, q * 1000), max(0.0, x * 1000)) for r, q, x in samples]).pi

    return judge


def judged_attainment(
    requests: Iterable[tuple[str, float, float, float]],
    judges: Mapping[str, Judge],
    phase_start: float,
    phase_end: float,
    interval_s: float,
) -> dict[str, ClassAttainment]:
    """As `attainment`, from (class, inserted, started, ended) (math.inf: not started, not ended), each class's PI
    in an interval given by its judge from the (response, queue, execution) of its requests ended in the interval."""
    if interval_s <= 0:
        raise ValueError(f"interval_s must be positive, not {interval_s}")
    by_class: dict[str, list[tuple[float, float, float]]] = {name: [] for name in judges}
    for name, inserted, started, ended in requests:
        if name in by_class:
            by_class[name].append((inserted, started, ended))
    bounds = []
    k = 0
    # Each bound from the phase's start, not by adding up: k * interval_s does not drift.
    while (end := phase_start + (k + 1) * interval_s) <= phase_end:
        bounds.append((k * interval_s, phase_start + k * interval_s, end))
        k += 1
    result = {}
    for name, judge in judges.items():
        intervals = []
        for offset, start, end in bounds:
            samples = [(e - i, min(s, e) - i, e - min(s, e)) for i, s, e in by_class[name] if start <= e < end]
            if samples:
                pi: float | None = judge(samples)
            elif any(inserted < end and ended >= start for inserted, _, ended in by_class[name]):
                pi = math.inf
            else:
                pi = None
            intervals.append(Interval(offset, pi, len(samples)))
        result[name] = ClassAttainment(tuple(intervals))
    return result


def worst_waits(requests: Iterable[tuple[str, float, float, float]]) -> dict[str, float]:
    """Each class's longest wait, start - insert, in seconds (math.inf: a request never started)."""
    worst: dict[str, float] = {}
    for name, inserted, started, _ in requests:
        worst[name] = max(worst.get(name, 0.0), started - inserted)
    return worst
