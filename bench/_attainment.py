"""Shared by the benchmarks: goal attainment over time, computed from the requests themselves rather than read from
the manager. A phase is cut into intervals of equal length from its start; the performance index (PI) of a class in
one interval is that of an average response time goal over the requests of the class that ENDED in it: their mean
response time (end - insert) divided by the goal. An interval in which the class had work, queued or in flight
(inserted before the interval's end and not ended before its start), but none of it ended is a miss (PI infinity);
one in which the class had no work at all is left out. A class's attainment is the share of its counted intervals
whose PI is at most 1: a PI read once at a phase's end says nothing of how long a class missed before.

`attainment` judges every class by an average goal from (class, inserted, ended). `judged_attainment` takes the
requests' start too, (class, inserted, started, ended), and a judge per class that gives the PI of the requests
ended in an interval: `goal_judge` judges them as the service judges a window (spark_jobs/manager/goals.py `evaluate`), so
a percentile goal's PI is the service's bucketed one. `worst_waits`: each class's longest wait (start - insert).
All but `attainment` are app/examples/attainment.py's, which `wlm demo` shares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.examples.attainment import ClassAttainment, Interval, Judge, Sample, goal_judge, judged_attainment, worst_waits
from app.policy.schemas import AverageGoal

__all__ = ["ClassAttainment", "Interval", "Judge", "Sample", "attainment", "goal_judge", "judged_attainment", "worst_waits"]


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
    judges = {name: goal_judge(AverageGoal(type="average", response_time_ms=round(goal * 1000))) for name, goal in goals_s.items()}
    return judged_attainment(
        ((name, inserted, inserted, ended) for name, inserted, ended in requests), judges, phase_start, phase_end, interval_s
    )
