"""Shared by the benchmarks: KEDA's rule for a Redis lists scaler, as a Horizontal Pod Autoscaler applies it. Pure.

KEDA's `redis` scaler reports the lists' length as an external metric with an AverageValue target of `listLength`
(default 5), so the HPA wants ceil(length / listLength) replicas, clamped to [minReplicaCount, maxReplicaCount]
(with minReplicaCount 1 or more KEDA never scales to zero, and the HPA does all the scaling). The HPA then
stabilises: it scales up to the newest recommendation at once (its default scale-up stabilisation window is 0 s),
and down only to the highest recommendation of the scale-down window (default 300 s; here what the caller gives).
Its tolerance (no change within 10 % of the target) and scale-up rate limits (4 pods or 100 % per 15 s) are left
out: with one metric and a handful of replicas they seldom bind.
"""

from __future__ import annotations

import argparse
import math
from collections import deque
from typing import Any

LIST_LENGTH = 5  # the scaler's default `listLength`


def replicas_for(queued: int, list_length: int, low: int, high: int) -> int:
    """The replicas the rule wants for `queued` items in the lists: ceil(queued / list_length) within [low, high]."""
    if list_length <= 0 or low < 0 or high < low or queued < 0:
        raise ValueError(f"bad rule: queued {queued}, list_length {list_length}, low {low}, high {high}")
    return min(high, max(low, math.ceil(queued / list_length)))


class Stabiliser:
    """The HPA's stabilisation of recommendations: up at once, down only to the highest recommendation of the
    last `down_window_s` seconds (the current one among them)."""

    def __init__(self, down_window_s: float) -> None:
        if down_window_s < 0:
            raise ValueError(f"down_window_s must be 0 or more, not {down_window_s}")
        self.down_window_s = down_window_s
        self._recommendations: deque[tuple[float, int]] = deque()

    def replicas(self, now_s: float, recommended: int, current: int) -> int:
        """The replica count to scale to at `now_s` (seconds, any monotonic clock) given the rule's
        recommendation and the current count."""
        self._recommendations.append((now_s, recommended))
        while self._recommendations[0][0] < now_s - self.down_window_s:
            self._recommendations.popleft()
        if recommended >= current:
            return recommended
        return min(current, max(count for _, count in self._recommendations))


def list_lengths(text: str) -> tuple[int, ...]:
    """--keda-list-lengths: whole numbers above 0, comma-separated, no repeats."""
    try:
        lengths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of whole numbers: {text!r}") from None
    if not lengths or min(lengths) < 1 or len(set(lengths)) != len(lengths):
        raise argparse.ArgumentTypeError(f"list lengths must be above 0 and differ: {text!r}")
    return lengths


def keda_label(list_length: int, first: bool) -> str:
    return "keda_rule" if first else f"keda_rule_l{list_length}"


def equal_attainment(systems: dict[str, Any], keda_labels: list[str]) -> dict[str, Any] | None:
    """The cheapest keda_rule run whose every class attains at least wlm's, and wlm's server-seconds over its; None
    when no listLength run got there."""
    wlm = systems["wlm"]

    def matches(label: str) -> bool:
        pairs = [(wlm["classes"][n]["attainment"], systems[label]["classes"][n]["attainment"]) for n in wlm["classes"]]
        return all(a is not None and b is not None and b >= a for a, b in pairs)

    matching = sorted((systems[label]["server_seconds"], label) for label in keda_labels if matches(label))
    if not matching:
        return None
    cost, label = matching[0]
    return {"system": label, "server_seconds": cost, "wlm_over_it": round(wlm["server_seconds"] / cost, 3)}
