"""Shared by the benchmarks: a workload trace read from a JSON file, and its seeded arrivals. Pure: no I/O but the
file's read.

A trace is a list of phases, one after another. Each phase has its length and, per service class, the class's
arrival rate (Poisson), service-time distribution, goal and importance:

    [{"name": "steady", "length_s": 60,
      "classes": {"ONLINE": {"rate_per_s": 4, "service_time": {"type": "exponential", "mean_ms": 100},
                             "goal": {"type": "average", "response_time_ms": 500}, "importance": 1}, ...}},
     ...]

- `name` is optional (default "phase N"); `length_s` a number above 0.
- Every phase names the same classes (a class without arrivals in a phase has rate_per_s 0). A class name is a
  policy's: upper case, up to 32 of A-Z 0-9 $ # @ _ . - (not starting with . or -).
- `rate_per_s`: a number, 0 or more; some class must have arrivals somewhere.
- `service_time`: {"type": "exponential", "mean_ms": M} or {"type": "fixed", "mean_ms": M}, M above 0. A drawn time
  is rounded to whole milliseconds, at least 1.
- `goal`: as in a policy, {"type": "average", "response_time_ms": R} or {"type": "percentile", "percentile": P,
  "response_time_ms": R} (R a whole number of ms from 1 to a day, P from 1 to 99); `importance`: 1 (highest) to 5.
  A class keeps one goal and one importance over the whole trace: the policy has one.

Every other key is refused. A mistake raises TraceError naming the field at fault, as a path into the document
(`[2].classes.BATCH.service_time.mean_ms`).
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[A-Z0-9$#@_][A-Z0-9$#@_.-]{0,31}$")
DAY_MS = 86_400_000
DISTRIBUTIONS = ("exponential", "fixed")


class TraceError(ValueError):
    """A trace that cannot be run: the message starts with the path of the field at fault."""


@dataclass(frozen=True)
class ServiceTime:
    type: str  # one of DISTRIBUTIONS
    mean_ms: float

    def draw(self, rng: random.Random) -> int:
        value = rng.expovariate(1 / self.mean_ms) if self.type == "exponential" else self.mean_ms
        return max(1, round(value))


@dataclass(frozen=True)
class Goal:
    type: str  # "average" or "percentile"
    response_time_ms: int
    percentile: int | None = None

    def as_policy(self) -> dict[str, Any]:
        """The goal as a policy writes it."""
        extra = {} if self.percentile is None else {"percentile": self.percentile}
        return {"type": self.type, **extra, "response_time_ms": self.response_time_ms}


@dataclass(frozen=True)
class WorkClass:
    name: str
    goal: Goal
    importance: int


@dataclass(frozen=True)
class Load:
    rate_per_s: float
    service_time: ServiceTime


@dataclass(frozen=True)
class Phase:
    name: str
    length_s: float
    loads: dict[str, Load]


@dataclass(frozen=True)
class Trace:
    phases: tuple[Phase, ...]
    classes: dict[str, WorkClass]  # in importance order (then by name)

    @property
    def length_s(self) -> float:
        return sum(phase.length_s for phase in self.phases)

    def summary(self) -> list[dict[str, Any]]:
        """The trace as its file gives it (normalised), for a benchmark's JSON."""
        return [
            {
                "name": phase.name,
                "length_s": phase.length_s,
                "classes": {
                    name: {
                        "rate_per_s": load.rate_per_s,
                        "service_time": {"type": load.service_time.type, "mean_ms": load.service_time.mean_ms},
                        "goal": self.classes[name].goal.as_policy(),
                        "importance": self.classes[name].importance,
                    }
                    for name, load in phase.loads.items()
                },
            }
            for phase in self.phases
        ]


@dataclass(frozen=True)
class Arrival:
    at_s: float  # seconds after the trace's start
    service_class: str
    service_ms: int


def _object(value: Any, path: str, required: set[str], optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TraceError(f"{path}: must be an object, got {json.dumps(value)}")
    missing = sorted(required - value.keys())
    if missing:
        raise TraceError(f"{path}.{missing[0]}: missing")
    unknown = sorted(value.keys() - required - optional)
    if unknown:
        raise TraceError(f"{path}.{unknown[0]}: unknown field (expected {', '.join(sorted(required | optional))})")
    return value


def _number(value: Any, path: str, *, above_zero: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (above_zero and value == 0)
    ):
        raise TraceError(f"{path}: must be a number {'above 0' if above_zero else '0 or more'}, got {json.dumps(value)}")
    return float(value)


def _whole(value: Any, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TraceError(f"{path}: must be a whole number from {low} to {high}, got {json.dumps(value)}")
    return value


def _service_time(value: Any, path: str) -> ServiceTime:
    fields = _object(value, path, {"type", "mean_ms"})
    if fields["type"] not in DISTRIBUTIONS:
        raise TraceError(f"{path}.type: must be one of {', '.join(DISTRIBUTIONS)}, got {json.dumps(fields['type'])}")
    return ServiceTime(fields["type"], _number(fields["mean_ms"], f"{path}.mean_ms", above_zero=True))


def _goal(value: Any, path: str) -> Goal:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "average":
        fields = _object(value, path, {"type", "response_time_ms"})
        return Goal("average", _whole(fields["response_time_ms"], f"{path}.response_time_ms", 1, DAY_MS))
    if kind == "percentile":
        fields = _object(value, path, {"type", "percentile", "response_time_ms"})
        return Goal(
            "percentile",
            _whole(fields["response_time_ms"], f"{path}.response_time_ms", 1, DAY_MS),
            _whole(fields["percentile"], f"{path}.percentile", 1, 99),
        )
    if isinstance(value, dict):
        raise TraceError(f'{path}.type: must be "average" or "percentile", got {json.dumps(kind)}')
    raise TraceError(f"{path}: must be an object, got {json.dumps(value)}")


def parse(document: Any) -> Trace:
    """The trace of a decoded JSON document; TraceError names the first field at fault."""
    if not isinstance(document, list) or not document:
        raise TraceError(f"(the document): must be a non-empty list of phases, got {json.dumps(document)[:80]}")
    phases: list[Phase] = []
    classes: dict[str, WorkClass] = {}
    for index, raw in enumerate(document):
        path = f"[{index}]"
        fields = _object(raw, path, {"length_s", "classes"}, frozenset({"name"}))
        name = fields.get("name", f"phase {index}")
        if not isinstance(name, str) or not name:
            raise TraceError(f"{path}.name: must be a non-empty string, got {json.dumps(name)}")
        length = _number(fields["length_s"], f"{path}.length_s", above_zero=True)
        named = fields["classes"]
        if not isinstance(named, dict) or not named:
            raise TraceError(f"{path}.classes: must be a non-empty object of service classes, got {json.dumps(named)}")
        if index and named.keys() != phases[0].loads.keys():
            odd = sorted(named.keys() ^ phases[0].loads.keys())[0]
            raise TraceError(f"{path}.classes.{odd}: every phase names the same classes (phase 0: {', '.join(phases[0].loads)})")
        loads = {}
        for class_name, spec in named.items():
            at = f"{path}.classes.{class_name}"
            if not NAME.match(class_name):
                raise TraceError(f"{at}: a class name is upper case, up to 32 of A-Z 0-9 $ # @ _ . - (not first . or -)")
            spec = _object(spec, at, {"rate_per_s", "service_time", "goal", "importance"})
            loads[class_name] = Load(
                _number(spec["rate_per_s"], f"{at}.rate_per_s", above_zero=False), _service_time(spec["service_time"], f"{at}.service_time")
            )
            work_class = WorkClass(class_name, _goal(spec["goal"], f"{at}.goal"), _whole(spec["importance"], f"{at}.importance", 1, 5))
            first = classes.setdefault(class_name, work_class)
            for field in ("goal", "importance"):
                if getattr(first, field) != getattr(work_class, field):
                    raise TraceError(f"{at}.{field}: differs from phase 0's; a class keeps one {field} over the trace (the policy has one)")
        phases.append(Phase(name, length, loads))
    if not any(load.rate_per_s > 0 for phase in phases for load in phase.loads.values()):
        raise TraceError("[0].classes: no class has arrivals in any phase (every rate_per_s is 0)")
    ordered = dict(sorted(classes.items(), key=lambda item: (item[1].importance, item[0])))
    return Trace(tuple(phases), ordered)


def load(path: Path) -> Trace:
    """The trace in the JSON file at `path`; TraceError (naming the file and the field at fault) otherwise."""
    try:
        document = json.loads(path.read_text())
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: not JSON ({exc})") from None
    try:
        return parse(document)
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from None


def arrivals(trace: Trace, seed: int) -> list[Arrival]:
    """The trace's arrivals, in time order: in each phase, each class's Poisson arrivals at its rate, each with a
    service time drawn from its distribution. The same trace and seed give the same arrivals."""
    rng = random.Random(seed)
    found: list[Arrival] = []
    start = 0.0
    for phase in trace.phases:
        end = start + phase.length_s
        for name, load in phase.loads.items():
            if load.rate_per_s <= 0:
                continue
            at = start + rng.expovariate(load.rate_per_s)
            while at < end:
                found.append(Arrival(at, name, load.service_time.draw(rng)))
                at += rng.expovariate(load.rate_per_s)
        start = end
    found.sort(key=lambda arrival: arrival.at_s)
    return found
