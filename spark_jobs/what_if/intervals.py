"""The replay's figures per interval (pure): from each request as served and the servers' timeline, per class period
its ended count, PI and whether it had work, and per class and for the environment the servers wanted and connected
and their server-seconds."""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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


def _worked(start: float, end: float, length: float, count: int) -> range:
    """The intervals in which work present from `start` to `end` was: the one it began in, and those [start, end)
    overlaps."""
    first = min(count - 1, int(start // length))
    if end <= start:
        return range(first, first + 1)
    return range(first, max(first, min(count - 1, math.ceil(end / length) - 1)) + 1)


class _Samples:
    """The ended requests of a class period in an interval, as columns (ms)."""

    __slots__ = ("queue", "response")

    def __init__(self) -> None:
        self.response, self.queue = array("d"), array("d")

    def add(self, response_ms: float, queue_ms: float) -> None:
        self.response.append(response_ms)
        self.queue.append(queue_ms)

    def extend(self, other: _Samples) -> None:
        self.response.extend(other.response)
        self.queue.extend(other.queue)


Key = tuple[int, str, int]  # (interval, service class, period)


def _collect(
    specs: Mapping[str, ServiceClass], served: ServedColumns, until_s: float, length: float, count: int
) -> tuple[dict[Key, _Samples], set[Key]]:
    """Per interval and class period, the requests that ended in it, and whether it had work of the period (queued
    or in flight)."""
    samples: dict[Key, _Samples] = defaultdict(_Samples)
    had_work: set[Key] = set()
    names = served.classes
    bounds_of = [_boundaries([p.duration_ms for p in specs[name].periods]) for name in names]
    inserted_s, selected_s, ended_s, period_of = served.inserted_s, served.selected_s, served.ended_s, served.period
    last_interval = count - 1
    for request, class_index in enumerate(served.service_class):
        name, bounds = names[class_index], bounds_of[class_index]
        inserted, ended = inserted_s[request], ended_s[request]
        gone = ended if ended < until_s else until_s  # NaN (not ended) compares False
        if not bounds:  # one period, as most classes have
            if inserted <= gone and inserted < until_s:
                first = min(last_interval, int(inserted // length))
                last = min(last_interval, math.ceil(gone / length) - 1) if gone > inserted else first
                had_work.add((first, name, 1))
                for index in range(first + 1, last + 1):
                    had_work.add((index, name, 1))
        else:
            # Its work in each period it reached: from entering the period until it ended or moved on.
            start, number = inserted, 1
            while start <= gone and start < until_s:
                end = min(gone, inserted + bounds[number - 1]) if number <= len(bounds) else gone
                for index in _worked(start, end, length, count):
                    had_work.add((index, name, number))
                if number > len(bounds):
                    break
                start, number = inserted + bounds[number - 1], number + 1
        if ended < until_s and period_of[request]:
            samples[(int(ended // length), name, period_of[request])].add(
                (ended - inserted) * 1000, (selected_s[request] - inserted) * 1000
            )
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
                executions = array("d", (response - queue for response, queue in zip(window.response, window.queue, strict=True)))
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
