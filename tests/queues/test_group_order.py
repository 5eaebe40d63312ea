"""The order a select looks at classes in when a resource group is under its min_in_flight (pure)."""

from __future__ import annotations

from dataclasses import replace

from app.queues.base import AeConfig, GroupCap
from app.queues.resource_groups import Grant, preferred_order


def test_a_group_under_its_minimum_goes_before_classes_of_equal_importance_only() -> None:
    floor = GroupCap("FLOOR", max_in_flight=None, min_in_flight=2)
    config = AeConfig(("A", "B", "C", "D"), 1000, 10, 1, class_ranks=(1, 2, 2, 3), class_groups=(None, None, floor, floor))
    under, met = Grant(floor, "r", 1, in_flight=1), Grant(floor, "r", 1, in_flight=2)
    # C before B (both 2), in a tier of its own so that a server's home class does not pass it; not before A (1)
    assert preferred_order(config, [under]) == [("A", 3), ("C", 4), ("B", 5), ("D", 6)]
    assert preferred_order(config, [met]) == [("A", 3), ("B", 5), ("C", 5), ("D", 7)]
    assert preferred_order(replace(config, class_groups=()), []) == [("A", 3), ("B", 5), ("C", 5), ("D", 7)]


def test_classes_of_unknown_importance_each_have_a_tier_of_their_own() -> None:
    config = AeConfig(("A", "B"), 1000, 10, 1)
    assert preferred_order(config, []) == [("A", 1), ("B", 3)]
