"""bench/_keda.py: KEDA's Redis lists rule and the HPA's stabilisation, as bench/goals_vs_peers.py's keda_rule scales."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _keda import LIST_LENGTH, Stabiliser, equal_attainment, keda_label, list_lengths, replicas_for


def test_replicas_are_the_queued_over_the_list_length_rounded_up_within_the_limits() -> None:
    assert LIST_LENGTH == 5
    assert [replicas_for(queued, 5, 2, 8) for queued in (0, 5, 10, 11, 16, 40, 41, 1000)] == [2, 2, 2, 3, 4, 8, 8, 8]
    assert replicas_for(1, 5, 0, 3) == 1 and replicas_for(0, 5, 0, 3) == 0
    for bad in ((1, 0, 1, 2), (1, 5, 3, 2), (-1, 5, 1, 2), (1, 5, -1, 2)):
        with pytest.raises(ValueError):
            replicas_for(*bad)


def test_up_at_once_down_only_to_the_highest_recommendation_of_the_window() -> None:
    stabiliser = Stabiliser(60)
    assert stabiliser.replicas(0, 2, 2) == 2
    assert stabiliser.replicas(10, 6, 2) == 6  # up at once
    assert stabiliser.replicas(20, 3, 6) == 6  # 6 was recommended 10 s ago: stays
    assert stabiliser.replicas(60, 2, 6) == 6
    assert stabiliser.replicas(71, 2, 6) == 3  # 6 left the window (61 s ago); 3 (51 s ago) is the highest left
    assert stabiliser.replicas(81, 2, 3) == 2
    assert stabiliser.replicas(82, 5, 2) == 5


def test_never_above_the_current_count_on_the_way_down_and_a_zero_window() -> None:
    stabiliser = Stabiliser(60)
    assert stabiliser.replicas(0, 8, 8) == 8
    assert stabiliser.replicas(10, 2, 4) == 4  # the window's 8 is above the current 4: no scale-up from a scale-down
    immediate = Stabiliser(0)
    assert immediate.replicas(0, 8, 2) == 8 and immediate.replicas(10, 2, 8) == 2
    with pytest.raises(ValueError):
        Stabiliser(-1)


def test_list_lengths_are_whole_numbers_above_zero_without_repeats() -> None:
    assert list_lengths("5") == (5,) and list_lengths("5,2,1") == (5, 2, 1)
    for bad in ("", "5,,2", "0", "5,-1", "2,2", "1.5", "five"):
        with pytest.raises(argparse.ArgumentTypeError):
            list_lengths(bad)
    assert [keda_label(5, True), keda_label(2, False)] == ["keda_rule", "keda_rule_l2"]


def _system(server_seconds: float, *attainments: float | None) -> dict[str, object]:
    return {"server_seconds": server_seconds, "classes": {f"C{k}": {"attainment": a} for k, a in enumerate(attainments)}}


def test_equal_attainment_is_the_cheapest_rule_run_at_least_as_good_as_wlm_in_every_class() -> None:
    systems = {
        "wlm": _system(1000, 1.0, 0.9),
        "keda_rule": _system(800, 0.95, 1.0),  # cheaper but short in the first class
        "keda_rule_l2": _system(1600, 1.0, 0.9),  # equal in both: counts
        "keda_rule_l1": _system(1250, 1.0, 0.95),  # better in both and cheaper than l2: chosen
    }
    assert equal_attainment(systems, ["keda_rule", "keda_rule_l2", "keda_rule_l1"]) == {
        "system": "keda_rule_l1",
        "server_seconds": 1250,
        "wlm_over_it": 0.8,
    }
    assert equal_attainment(systems, ["keda_rule"]) is None
    systems["keda_rule_l2"] = _system(1600, 1.0, None)  # a class never judged cannot match
    assert equal_attainment(systems, ["keda_rule", "keda_rule_l2"]) is None
