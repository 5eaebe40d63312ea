"""The select order (spark_jobs/manager/select_order.py), pure, against hand-worked cases; the same rule run by the
select script on a real Redis is compared with it in tests/queues/test_select_conformance.py."""

from __future__ import annotations

import pytest

from spark_jobs.manager.select_order import (
    Promotion,
    PromotionBucket,
    Queued,
    RankedClass,
    Take,
    class_order,
    granted_slots,
    importance_rank,
    look_order,
    preferred_order,
    select,
)

NOW = 100_000
# Promotion after 20 s, a tenth of a token per request selected.
PROMOTION = Promotion(after_ms=20_000, share=0.1)
SPENT = PromotionBucket(tokens=0.0, due_ms=0.0)


def fresh(dependent: int = 0, independent: int = 0) -> Queued:
    """Work queued a moment ago: no promotion is due."""
    return Queued(dependent, independent, NOW - 1)


def test_the_preferred_order_puts_a_group_under_its_minimum_first_in_its_importance() -> None:
    classes = [RankedClass("A", 1), RankedClass("B", 2), RankedClass("C", 2, "FLOOR"), RankedClass("D", 3, "FLOOR")]
    assert preferred_order(classes, {"FLOOR"}) == [("A", 3), ("C", 4), ("B", 5), ("D", 6)]
    assert preferred_order(classes, set()) == [("A", 3), ("B", 5), ("C", 5), ("D", 7)]


@pytest.mark.parametrize(
    ("home", "expected"),
    [
        (None, ["A", "B", "C", "D"]),
        ("C", ["A", "C", "B", "D"]),  # first among its tier, never before the more important A
        ("B", ["A", "B", "C", "D"]),
        ("D", ["A", "B", "C", "D"]),  # alone in its tier
        ("X", ["A", "B", "C", "D"]),  # a home the environment no longer has
    ],
)
def test_the_home_class_goes_first_within_its_tier(home: str | None, expected: list[str]) -> None:
    assert look_order([("A", 1), ("B", 2), ("C", 2), ("D", 3)], home) == expected


@pytest.mark.parametrize(
    ("want", "max_in_flight", "in_flight", "granted"),
    [(5, None, 100, 5), (5, 3, 0, 3), (5, 3, 2, 1), (5, 3, 3, 0), (5, 3, 4, 0), (2, 10, 1, 2)],
)
def test_a_group_grants_what_its_cap_leaves(want: int, max_in_flight: int | None, in_flight: int, granted: int) -> None:
    assert granted_slots(want, max_in_flight, in_flight) == granted


def test_most_important_first_dependent_before_independent() -> None:
    queued = {"A": fresh(dependent=1, independent=1), "B": fresh(independent=3)}
    taken = select(["A", "B"], queued, want=4, now_ms=NOW, bucket=SPENT, promotion=PROMOTION)
    assert taken.takes == (Take("A", True, 1), Take("A", False, 1), Take("B", False, 2))
    assert taken.count == 4


def test_a_full_group_is_passed_over_and_a_group_gives_no_more_than_it_granted() -> None:
    queued = {"A": fresh(independent=3), "B": fresh(independent=3), "C": fresh(independent=3)}
    groups = {"A": "FULL", "B": "SOME"}
    taken = select(
        ["A", "B", "C"], queued, want=3, now_ms=NOW, bucket=SPENT, promotion=PROMOTION, group_of=groups, slots={"FULL": 0, "SOME": 1}
    )
    assert taken.takes == (Take("B", False, 1), Take("C", False, 2))


def test_the_class_waiting_longest_past_the_promotion_time_is_promoted_ahead_of_the_order() -> None:
    # A has work (it is taken from anyway); B has waited 90 s and C 50 s, both past 20 s: B, the longest.
    queued = {"A": fresh(independent=5), "B": Queued(0, 2, NOW - 90_000), "C": Queued(1, 0, NOW - 50_000)}
    taken = select(["A", "B", "C"], queued, want=3, now_ms=NOW, bucket=PromotionBucket(), promotion=PROMOTION)
    assert taken.takes == (Take("B", False, 1, promoted=True), Take("A", False, 2))
    # The token spent, three selected refill 0.3 of one; due at once, B may hold more such requests.
    assert taken.bucket.tokens == pytest.approx(0.3) and taken.bucket.due_ms == NOW


def test_no_promotion_without_a_whole_token_nor_before_it_is_due() -> None:
    queued = {"A": fresh(independent=5), "B": Queued(0, 2, NOW - 90_000)}
    for bucket in (PromotionBucket(tokens=0.5), PromotionBucket(tokens=1, due_ms=NOW + 1)):
        taken = select(["A", "B"], queued, want=1, now_ms=NOW, bucket=bucket, promotion=PROMOTION)
        assert taken.takes == (Take("A", False, 1),)
        assert taken.bucket == PromotionBucket(min(1.0, bucket.tokens + 0.1), bucket.due_ms)


def test_a_look_that_promotes_nothing_is_due_again_when_its_oldest_head_passes_the_promotion_time() -> None:
    queued = {"A": fresh(independent=5), "B": Queued(0, 2, NOW - 5_000), "C": Queued(0, 2, NOW - 15_000)}
    taken = select(["A", "B", "C"], queued, want=1, now_ms=NOW, bucket=PromotionBucket(), promotion=PROMOTION)
    assert taken.takes == (Take("A", False, 1),)
    assert taken.bucket == PromotionBucket(tokens=1.0, due_ms=NOW + 5_000)  # C's head passes 20 s in 5 s


def test_a_class_at_its_group_s_cap_is_not_promoted() -> None:
    queued = {"A": fresh(independent=5), "B": Queued(0, 2, NOW - 90_000)}
    taken = select(
        ["A", "B"], queued, want=2, now_ms=NOW, bucket=PromotionBucket(), promotion=PROMOTION, group_of={"B": "G"}, slots={"G": 0}
    )
    assert taken.takes == (Take("A", False, 2),)


def test_the_first_class_with_work_is_not_promoted_however_long_it_waited() -> None:
    queued = {"A": Queued(0, 1, NOW - 90_000), "B": Queued(0, 1, NOW - 1)}
    taken = select(["A", "B"], queued, want=2, now_ms=NOW, bucket=PromotionBucket(), promotion=PROMOTION)
    assert taken.takes == (Take("A", False, 1), Take("B", False, 1))


def test_the_class_order_is_by_importance_then_name_with_sysother_last() -> None:
    ranks = {"SYSOTHER": 6, "B": 2, "A": 2, "D": 6, "C": 1}
    assert class_order(ranks) == ("C", "A", "B", "D", "SYSOTHER")
    assert [importance_rank(3, False), importance_rank(3, True), importance_rank(None, False)] == [3, 6, 6]
