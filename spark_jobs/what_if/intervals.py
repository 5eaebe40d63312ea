"""The replay's figures per interval (pure): from each request as served and the servers' timeline, per class period
its ended count, PI and whether it had work, and per class and for the environment the servers wanted and connected
and their server-seconds."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_jobs.contract.goals import BUCKET_COUNT
from spark_jobs.manager.goals import Sample, distribution, evaluate
from spark_jobs.what_if.model import ClassInterval, Environment, EnvironmentInterval, Served


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


def _buckets(of_goal: tuple[int, ...] | None, window: Sequence[Sample], average_ms: float | None) -> tuple[int, ...] | None:
    """The 14 buckets: of the goal's response time, else (velocity, discretionary) of the average response time."""
    if of_goal is not None or not window:
        return of_goal
    if not average_ms:
        return (len(window), *([0] * (BUCKET_COUNT - 1)))  # every response took no time: all within any limit
    return distribution((sample[0] for sample in window), average_ms)


def summarise(
    environment: Environment, order: Sequence[str], served: Sequence[Served], timeline: Timeline, until_s: float, length: float
) -> tuple[tuple[ClassInterval, ...], tuple[EnvironmentInterval, ...]]:
    count = math.ceil(until_s / length)
    specs = {c.name: c for c in environment.classes}
    samples: dict[tuple[int, str, int], list[tuple[float, float, float]]] = defaultdict(list)
    had_work: set[tuple[int, str, int]] = set()
    for request in served:
        bounds = _boundaries([p.duration_ms for p in specs[request.service_class].periods])
        gone = min(request.ended_s, until_s) if request.ended_s is not None else until_s
        # Its work in each period it reached: from entering the period until it ended or moved on.
        starts = [request.inserted_s] + [request.inserted_s + bound for bound in bounds]
        for number, start in enumerate(starts, 1):
            if start > gone or start >= until_s:
                break
            end = min(gone, starts[number]) if number < len(starts) else gone
            first = min(count - 1, int(start // length))
            had_work.add((first, request.service_class, number))
            for index, _ in _spread(start, end, length, count):
                had_work.add((index, request.service_class, number))
        if request.ended_s is not None and request.ended_s < until_s and request.period is not None:
            assert request.selected_s is not None
            response, queue = request.ended_s - request.inserted_s, request.selected_s - request.inserted_s
            key = (int(request.ended_s // length), request.service_class, request.period)
            samples[key].append((response * 1000, queue * 1000, (response - queue) * 1000))

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
                window = samples.get((index, name, number), [])
                worked = (index, name, number) in had_work
                if number > 1 and not window and not worked:
                    continue  # a later period appears once work reaches it
                judged = evaluate(period.goal, window)
                first = number == 1
                seconds = connected.get((index, name), 0.0)
                classes.append(
                    ClassInterval(
                        start_s=index * length,
                        service_class=name,
                        period=number,
                        ended=len(window),
                        pi=judged.pi,
                        had_work=worked,
                        servers_wanted=wanted.get((index, name), 0.0) / span if first else None,
                        servers_connected=seconds / span if first else None,
                        server_seconds=seconds if first else None,
                        response_avg_ms=judged.avg_response_ms,
                        response_p50_ms=judged.p50_response_ms,
                        response_p90_ms=judged.p90_response_ms,
                        response_p99_ms=judged.p99_response_ms,
                        buckets=_buckets(judged.distribution, window, judged.avg_response_ms),
                    )
                )
        seconds = sum(value for (i, _), value in connected.items() if i == index)
        wanted_total = sum(value for (i, _), value in wanted.items() if i == index)
        totals.append(EnvironmentInterval(index * length, wanted_total / span, seconds / span, seconds))
    return tuple(classes), tuple(totals)
