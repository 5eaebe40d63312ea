"""The replay's figures per interval (pure): from each request as served and the servers' timeline, per class period
its ended count, PI and whether it had work, and per class and for the environment the servers wanted and connected
and their server-seconds."""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from spark_jobs.contract.goals import BUCKET_COUNT
from spark_jobs.manager.goals import evaluate_columns, sorted_distribution
from spark_jobs.what_if.model import ClassInterval, Environment, EnvironmentInterval, ServedColumns, ServiceClass


@dataclass
class Timeline:
    """What the servers did: each server's connected spans with the home it had (None: none), and each decision's
    count per class, in force until the next."""

    spans: list[tuple[float, float, str | None]] = field(default_factory=list)
    decisions: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def connected(self, start: float, end: float, home: str | None) -> None:
        if end > start:
            self.spans.append((start, end, home))

    def wanted(self, at: float, desired: Mapping[str, int]) -> None:
        self.decisions.append((at, dict(desired)))


def _spread(start: float, end: float, length: float, count: int) -> list[tuple[int, float]]:
    """The intervals (of `length`, `count` of them) that [start, end) overlaps, with how long it is in each."""
    overlaps = []
    first, last = int(start // length), min(count - 1, int(math.ceil(end / length)) - 1)
    for index in range(first, last + 1):
        overlap = min(end, (index + 1) * length) - max(start, index * length)
        if overlap > 0:
            overlaps.append((index, overlap))
    return overlaps


def _boundaries(durations: Sequence[int | None]) -> list[float]:
    """Seconds after its insert at which a request enters each period after the first (the last open-ended)."""
    bounds, elapsed = [], 0.0
    for duration_ms in durations[:-1]:
        elapsed += math.inf if duration_ms is None else duration_ms / 1000
        bounds.append(elapsed)
    return bounds


def _buckets(of_goal: tuple[int, ...] | None, responses_ms: Sequence[float], average_ms: float | None) -> tuple[int, ...] | None:
    """The 14 buckets: of the goal's response time, else (velocity, discretionary) of the average response time."""
    if of_goal is not None or not responses_ms:
        return of_goal
    if not average_ms:
        return (len(responses_ms), *([0] * (BUCKET_COUNT - 1)))  # every response took no time: all within any limit
    return sorted_distribution(sorted(responses_ms), average_ms)


class _Samples:
    """The ended requests of a class period in an interval, as columns (ms)."""

    __slots__ = ("queue", "response")

    def __init__(self, response: np.ndarray | None = None, queue: np.ndarray | None = None) -> None:
        self.response, self.queue = _column(response), _column(queue)

    def extend(self, other: _Samples) -> None:
        self.response.extend(other.response)
        self.queue.extend(other.queue)


def _column(values: np.ndarray | None) -> array[float]:
    column = array("d")
    if values is not None:
        column.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return column


def _floats(column: Sequence[float]) -> np.ndarray:
    return np.asarray(column, dtype=np.float64)


Key = tuple[int, str, int]  # (interval, service class, period)


def _intervals(times: np.ndarray, length: float) -> np.ndarray:
    """The interval of each time (`int(time // length)`, as whole numbers)."""
    return np.floor_divide(times, length).astype(np.int64)


def _worked(start: np.ndarray, end: np.ndarray, length: float, count: int) -> np.ndarray:
    """Of work present from `start` to `end` (each a request's), which intervals had any: the one each began in,
    and those its [start, end) overlaps; as a flag per interval."""
    first = np.minimum(count - 1, _intervals(start, length))
    spans = end > start
    last = first.copy()
    last[spans] = np.maximum(first[spans], np.minimum(count - 1, np.ceil(end[spans] / length).astype(np.int64) - 1))
    # Each span adds one from its first interval on and takes it away after its last.
    return np.cumsum(np.bincount(first, minlength=count + 1) - np.bincount(last + 1, minlength=count + 1))[:count] > 0


def _collect(
    specs: Mapping[str, ServiceClass], served: ServedColumns, until_s: float, length: float, count: int
) -> tuple[dict[Key, _Samples], set[Key]]:
    """Per interval and class period, the requests that ended in it, and whether it had work of the period (queued
    or in flight). By class and period over the columns: a day holds millions of requests, of a few classes."""
    names = served.classes
    inserted, ended = _floats(served.inserted_s), _floats(served.ended_s)
    class_of = np.asarray(served.service_class, dtype=np.int64)
    period_of = np.asarray(served.period, dtype=np.int64)
    gone = np.where(ended < until_s, ended, until_s)  # NaN (not ended) compares False
    had_work: set[Key] = set()
    for class_index, name in enumerate(names):
        of_class = class_of == class_index
        if not of_class.any():
            continue
        bounds = _boundaries([p.duration_ms for p in specs[name].periods])
        inserted_c, gone_c = inserted[of_class], gone[of_class]
        # Its work in each period it reached: from entering the period until it ended or moved on.
        reached = np.ones(len(inserted_c), dtype=bool)
        for number in range(1, len(bounds) + 2):
            start = inserted_c if number == 1 else inserted_c + bounds[number - 2]
            reached &= (start <= gone_c) & (start < until_s)
            if not reached.any():
                break
            end = np.minimum(gone_c, inserted_c + bounds[number - 1]) if number <= len(bounds) else gone_c
            worked = _worked(start[reached], end[reached], length, count)
            had_work.update((int(index), name, number) for index in np.flatnonzero(worked))
    samples: dict[Key, _Samples] = {}
    done = (ended < until_s) & (period_of != 0)
    if done.any():
        ended_d, inserted_d = ended[done], inserted[done]
        response = (ended_d - inserted_d) * 1000
        queue = (_floats(served.selected_s)[done] - inserted_d) * 1000
        keys = np.stack((_intervals(ended_d, length), class_of[done], period_of[done]))
        order = np.lexsort(keys[::-1])
        keys = keys[:, order]
        starts = np.flatnonzero(np.concatenate(([True], (keys[:, 1:] != keys[:, :-1]).any(axis=0))))
        for first, last in zip(starts, [*starts[1:], len(order)], strict=True):
            index, class_index, number = keys[:, first]
            rows = order[first:last]
            samples[(int(index), names[class_index], int(number))] = _Samples(response[rows], queue[rows])
    return samples, had_work


Figures = tuple[tuple[ClassInterval, ...], tuple[EnvironmentInterval, ...]]


def summarise(
    environment: Environment, order: Sequence[str], served: ServedColumns, timeline: Timeline, until_s: float, length: float
) -> tuple[Figures, Figures]:
    """The figures per interval of `length`, and over the whole replay (one interval of `until_s`)."""
    count = math.ceil(until_s / length)
    specs = {c.name: c for c in environment.classes}
    samples, had_work = _collect(specs, served, until_s, length, count)
    whole: dict[Key, _Samples] = defaultdict(_Samples)
    for (_, name, number), window in sorted(samples.items(), key=lambda item: item[0][0]):
        whole[(0, name, number)].extend(window)
    whole_work = {(0, name, number) for _, name, number in had_work}
    return (
        _figures(specs, order, samples, had_work, timeline, until_s, length, count),
        _figures(specs, order, whole, whole_work, timeline, until_s, until_s, 1),
    )


def _figures(
    specs: Mapping[str, ServiceClass],
    order: Sequence[str],
    samples: Mapping[Key, _Samples],
    had_work: set[Key],
    timeline: Timeline,
    until_s: float,
    length: float,
    count: int,
) -> Figures:
    wanted: dict[tuple[int, str], float] = defaultdict(float)
    for n, (at, desired) in enumerate(timeline.decisions):
        until = timeline.decisions[n + 1][0] if n + 1 < len(timeline.decisions) else until_s
        for index, overlap in _spread(at, min(until, until_s), length, count):
            for name, servers in desired.items():
                wanted[(index, name)] += servers * overlap
    connected: dict[tuple[int, str | None], float] = defaultdict(float)
    for start, end, home in timeline.spans:
        for index, overlap in _spread(start, min(end, until_s), length, count):
            connected[(index, home)] += overlap

    classes, totals = [], []
    for index in range(count):
        span = min(length, until_s - index * length)
        for name in order:
            for number, period in enumerate(specs[name].periods, 1):
                window = samples.get((index, name, number)) or _Samples()
                worked = (index, name, number) in had_work
                if number > 1 and not window.response and not worked:
                    continue  # a later period appears once work reaches it
                executions = _column(_floats(window.response) - _floats(window.queue))
                judged = evaluate_columns(period.goal, window.response, window.queue, executions)
                first = number == 1
                seconds = connected.get((index, name), 0.0)
                classes.append(
                    ClassInterval(
                        start_s=index * length,
                        service_class=name,
                        period=number,
                        ended=len(window.response),
                        pi=judged.pi,
                        had_work=worked,
                        servers_wanted=wanted.get((index, name), 0.0) / span if first else None,
                        servers_connected=seconds / span if first else None,
                        server_seconds=seconds if first else None,
                        response_avg_ms=judged.avg_response_ms,
                        response_p50_ms=judged.p50_response_ms,
                        response_p90_ms=judged.p90_response_ms,
                        response_p99_ms=judged.p99_response_ms,
                        buckets=_buckets(judged.distribution, window.response, judged.avg_response_ms),
                    )
                )
        seconds = sum(value for (i, _), value in connected.items() if i == index)
        wanted_total = sum(value for (i, _), value in wanted.items() if i == index)
        totals.append(EnvironmentInterval(index * length, wanted_total / span, seconds / span, seconds))
    return tuple(classes), tuple(totals)
