"""The delay samples' counts (RMF's using and delay samples), kept by the elected scheduler in memory: one sample of an
environment on a node counts each of its class queues' requests by state (app/servers/delays.py `queue_states`), and
the counts add up per queue and minute (the rows written once a minute: app/servers/delay_records.py) and per queue
and slot of a few seconds (what the goal evaluation shows over its window: `DelayBook.window`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.queues.delay_figures import DelayFigures
from app.servers.delays import STATES, USING, DelayCause, DelayFacts, queue_states

MINUTE_MS = 60_000
# The live window is summed from slots this long: a window's edge is known to within one.
SLOT_MS = 5_000
# A queue's counts: samples taken, then requests counted per state (STATES' order).
Counts = list[int]
# A class queue of a sample: service class and period.
ClassPeriod = tuple[str, int]
# A class queue of the book: environment, node, service class, period.
QueueKey = tuple[str, str, str, int]
_INDEX = {state: index for index, state in enumerate(STATES, 1)}


@dataclass(frozen=True, slots=True)
class SampledClass:
    """What a sample needs of a service class of the environment, beside its figures."""

    name: str
    tier: int  # its importance rank (lower: more important), as a select orders it
    periods: int
    group_at_cap: bool  # its resource group has its max in flight


def place_sample(figures: DelayFigures, classes: Sequence[SampledClass], holds_work: bool) -> dict[ClassPeriod, dict[str, int]]:
    """One sample of an environment on a node (pure): per class period, its requests by state. Queued requests are in
    their class's first period (as the goal evaluation counts them), served ones in theirs."""
    tier_of = {c.name: c.tier for c in classes}
    held_tiers = {tier_of[name] for (name, _), count in figures.held_by_period.items() if count > 0 and name in tier_of}
    free = max(0, figures.worker_tasks - figures.held)
    sample = {}
    for c in classes:
        facts = DelayFacts(
            environment_holds_work=holds_work,
            delivered_before=False,
            group_at_cap=c.group_at_cap,
            servers_connected=figures.servers,
            servers_wanted=figures.wanted,
            free_worker_tasks=free,
            holding_equal_or_higher=any(tier <= c.tier for tier in held_tiers),
            holding_lower=any(tier > c.tier for tier in held_tiers),
        )
        for period in range(1, c.periods + 1):
            first = period == 1
            queued = figures.queued.get(c.name, 0) if first else 0
            redelivered = figures.redelivered.get(c.name, 0) if first else 0
            sample[(c.name, period)] = queue_states(facts, figures.held_by_period.get((c.name, period), 0), queued, redelivered)
    return sample


def added(counts: Counts | None, states: Mapping[str, int], samples: int = 1) -> Counts:
    """`counts` (None: none yet) with `samples` more samples counting `states` (pure)."""
    total = counts[:] if counts is not None else [0] * (len(STATES) + 1)
    total[0] += samples
    for state, count in states.items():
        total[_INDEX[state]] += count
    return total


def summed(counts: Counts | None, more: Counts) -> Counts:
    return more[:] if counts is None else [a + b for a, b in zip(counts, more, strict=True)]


@dataclass(frozen=True, slots=True)
class Shares:
    """A class period's states as percentages of every request counted in one (RMF's using and delay %)."""

    samples: int
    using_pct: float | None  # None: no request counted
    delay_pct: dict[str, float]  # per cause (each cause named, 0 when none)


def shares(counts: Counts | None) -> Shares:
    """The percentages of `counts` (pure): `unknown` is part of the whole, so using and the delays need not make 100."""
    if counts is None:
        return Shares(0, None, {cause.value: 0.0 for cause in DelayCause})
    states = dict(zip(STATES, counts[1:], strict=True))
    whole = sum(states.values())
    if whole == 0:
        return Shares(counts[0], None, {cause.value: 0.0 for cause in DelayCause})
    return Shares(counts[0], 100 * states[USING] / whole, {cause.value: 100 * states[cause.value] / whole for cause in DelayCause})


class DelayBook:
    """The counts of one scheduler's samples: per queue and minute until they are taken to be written, per queue and
    slot for the live window."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._minutes: dict[int, dict[QueueKey, Counts]] = {}
        self._slots: dict[int, dict[tuple[str, str], dict[ClassPeriod, Counts]]] = {}

    def add(self, now_ms: int, ae: str, node: str, sample: Mapping[ClassPeriod, Mapping[str, int]]) -> None:
        minute = self._minutes.setdefault(now_ms // MINUTE_MS * MINUTE_MS, {})
        slot = self._slots.setdefault(now_ms // SLOT_MS, {}).setdefault((ae, node), {})
        for (service_class, period), states in sample.items():
            key = (ae, node, service_class, period)
            minute[key] = added(minute.get(key), states)
            slot[(service_class, period)] = added(slot.get((service_class, period)), states)
        for old in [s for s in self._slots if s < (now_ms - self.window_ms) // SLOT_MS]:
            del self._slots[old]

    def take_minutes(self, before_ms: int | None) -> list[tuple[int, QueueKey, Counts]]:
        """The counts of the minutes that began before `before_ms` (None: every minute, the current one too), given up
        to be written: (minute's start in ms, queue, counts)."""
        taken = sorted(m for m in self._minutes if before_ms is None or m + MINUTE_MS <= before_ms)
        return [(minute, key, counts) for minute in taken for key, counts in self._minutes.pop(minute).items()]

    def window(self, ae: str, node: str, now_ms: int) -> dict[ClassPeriod, Counts]:
        """Per class period of an environment on a node, the counts of the slots within the window before `now_ms`."""
        first = (now_ms - self.window_ms) // SLOT_MS
        result: dict[ClassPeriod, Counts] = {}
        for slot, places in self._slots.items():
            if slot >= first:
                for class_period, counts in places.get((ae, node), {}).items():
                    result[class_period] = summed(result.get(class_period), counts)
        return result
