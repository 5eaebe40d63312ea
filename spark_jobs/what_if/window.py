"""The window a what-if decision judges: the newest ended requests, with each class's figures of its first period
(pure: no I/O, no Spark)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np

from spark_jobs.contract.goals import BUCKET_COUNT, TOLERANT_BUCKET_LIMITS_PCT
from spark_jobs.manager.goals import execution_velocity, window_pi
from spark_jobs.manager.policy import AverageGoal, PercentileGoal
from spark_jobs.what_if.model import Arrivals, ServiceClass

# The newest ended requests the end scripts keep for goal evaluation (MAX_SAMPLES in
# app/queues/lua/includes/end_held.lua): at high rates the window is in effect the last this many.
MAX_SAMPLES = 10_000


class Window:
    """The ended requests a decision judges (the newest MAX_SAMPLES, ended from now - window on), with each class's
    figures of its first period. An end only notes its request, in the order they end; a decision brings the
    figures up to date over the columns (numpy: what ended since the last added, what left the window taken away),
    so that its cost is per decision, not per request. The times are summed in whole microseconds, so that what
    leaves takes away exactly what it added."""

    def __init__(self, classes: Sequence[ServiceClass], arrivals: Arrivals, selected: array[float], ended: array[float]) -> None:
        names = arrivals.classes
        self.index = {name: n for n, name in enumerate(names)}  # the arrivals' class index of each name
        # The columns the samples are read from, as numpy views: none of them grows in a replay.
        self.at, self.selected, self.ended = (np.frombuffer(column, dtype=np.float64) for column in (arrivals.at_s, selected, ended))
        self.class_of = np.frombuffer(arrivals.service_class, dtype=np.uint16)
        self.requests = array("q")  # each ended request, in the order they ended
        self.first = 0  # of `requests`, the oldest still in the window
        self.counted = 0  # of `requests`, how many the figures have added
        specs = {c.name: c for c in classes}
        # The response time from which a request is past its class's first period (`period_number`): none for a
        # class of one period, or whose first is open-ended.
        durations = [[p.duration_ms for p in specs[name].periods] for name in names]
        self.first_ends_ms = np.array([math.inf if len(d) < 2 or d[0] is None else d[0] for d in durations], dtype=np.float64)
        # The goal's response time of a class whose first period is judged by its buckets (NaN: none).
        goals = [specs[name].periods[0].goal for name in names]
        self.goal_ms = np.array([g.response_time_ms if isinstance(g, AverageGoal | PercentileGoal) else math.nan for g in goals])
        self.limits = np.array(TOLERANT_BUCKET_LIMITS_PCT, dtype=np.float64)
        self.count = np.zeros(len(names), dtype=np.int64)
        self.response_us = np.zeros(len(names), dtype=np.int64)
        self.queue_us = np.zeros(len(names), dtype=np.int64)
        self.buckets = np.zeros((len(names), BUCKET_COUNT), dtype=np.int64)

    def since(self, start: float) -> None:
        """Keep the samples ended from `start` on (and the newest MAX_SAMPLES), as the service reads them."""
        last = len(self.requests)
        requests = np.frombuffer(self.requests, dtype=np.int64)  # a local view: `requests` grows again after
        first = max(self.first, last - MAX_SAMPLES)
        if first < last:
            first += int(np.searchsorted(self.ended[requests[first:last]], start, side="left"))  # ends in time order
        # What entered and stays is added, what was added and left taken away (what did both changes nothing).
        entered, left = requests[max(self.counted, first) : last], requests[self.first : min(first, self.counted)]
        self.first, self.counted = first, last
        if len(entered) or len(left):
            self._apply(np.concatenate((entered, left)), len(entered))

    def _apply(self, requests: np.ndarray, entered: int) -> None:
        """Add the samples of the first `entered` of `requests` to the figures and take the rest away, as the
        service judges each: past the first period it counts towards MAX_SAMPLES only; the bucket by bucket_index's
        search. The sums are exact: whole numbers far below 2**53, in float64 (numpy's weighted count)."""
        sign = np.ones(len(requests))
        sign[entered:] = -1
        inserted, classes = self.at[requests], self.class_of[requests].astype(np.intp)
        response_ms = (self.ended[requests] - inserted) * 1000
        queue_ms = (self.selected[requests] - inserted) * 1000
        judged = response_ms < self.first_ends_ms[classes]
        response_ms, queue_ms, classes, sign = response_ms[judged], queue_ms[judged], classes[judged], sign[judged]
        count = len(self.count)
        self.count += np.bincount(classes, weights=sign, minlength=count).astype(np.int64)
        self.response_us += np.bincount(classes, weights=sign * np.rint(response_ms * 1000), minlength=count).astype(np.int64)
        self.queue_us += np.bincount(classes, weights=sign * np.rint(queue_ms * 1000), minlength=count).astype(np.int64)
        goal_ms = self.goal_ms[classes]
        bucketed = ~np.isnan(goal_ms)
        if bucketed.any():
            buckets = np.searchsorted(self.limits, response_ms[bucketed] * 100 / goal_ms[bucketed], side="left")
            flat = np.bincount(classes[bucketed] * BUCKET_COUNT + buckets, weights=sign[bucketed], minlength=count * BUCKET_COUNT)
            self.buckets += flat.astype(np.int64).reshape(count, BUCKET_COUNT)

    def judged(self, name: str, first: ServiceClass) -> tuple[int, float | None, float | None]:
        """The class's first period over the window: ended, PI and average execution time (ms), as `evaluate`."""
        index = self.index.get(name)
        ended = 0 if index is None else int(self.count[index])
        if not ended:
            return 0, window_pi(first.periods[0].goal, None, [0] * BUCKET_COUNT, None), None
        response_ms, queue_ms = int(self.response_us[index]) / 1000, int(self.queue_us[index]) / 1000
        execution_ms = response_ms - queue_ms
        pi = window_pi(first.periods[0].goal, response_ms / ended, self.buckets[index].tolist(), execution_velocity(execution_ms, queue_ms))
        return ended, pi, execution_ms / ended
