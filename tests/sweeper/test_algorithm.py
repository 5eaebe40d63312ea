"""The sweeper's decision (TPF's slow queue sweeper: docs/sweeper.md) on its own: every branch of the rule, over a grid of queue shapes."""

from __future__ import annotations

import itertools

import pytest

from app.sweeper.algorithm import BUFFER_EXTRA, SWEEP_FACTOR, SweepPlan, plan_sweep, service_rate


def test_the_seed_constants() -> None:
    assert (SWEEP_FACTOR, BUFFER_EXTRA) == (2, 5)


@pytest.mark.parametrize(
    ("rate", "front", "rear", "chained", "expected"),
    [
        (10, 20, 0, False, None),  # exactly twice the rate: not more than twice
        (10, 21, 0, False, SweepPlan(15, 6, 0)),  # one more: all but rate + 5 at the front
        (0, 6, 0, False, SweepPlan(5, 1, 0)),  # not served at all: the buffer is 5
        (0, 5, 0, False, None),  # the buffer alone: nothing to move
        (100, 150, 50, True, None),  # 200 in memory: not more than twice the rate
        (100, 150, 51, True, SweepPlan(105, 45, 51)),  # 201: the front beyond the buffer and all of the rear
        (10, 3, 40, True, SweepPlan(15, 0, 40)),  # swept already: the rear lies behind the chain, it all goes
        (10, 3, 40, False, None),  # no chain and a short front: the rear is the buffer's continuation, it stays
        (10, 15, 40, False, SweepPlan(15, 0, 40)),  # no chain, the front fills the buffer: the rear goes
    ],
)
def test_plan(rate: int, front: int, rear: int, chained: bool, expected: SweepPlan | None) -> None:
    assert plan_sweep(rate, front, rear, chained=chained) == expected


def test_small_queues_below_the_floor_stay() -> None:
    assert plan_sweep(0, 99, 0, chained=False, min_in_memory=100) is None
    assert plan_sweep(0, 100, 0, chained=False, min_in_memory=100) == SweepPlan(5, 95, 0)


def test_the_rule_over_a_grid() -> None:
    shapes = itertools.product(range(0, 30, 3), range(0, 80, 7), range(0, 50, 9), (False, True), (0, 40))
    for rate, front, rear, chained, floor in shapes:
        plan = plan_sweep(rate, front, rear, chained=chained, min_in_memory=floor)
        in_memory, keep = front + rear, rate + BUFFER_EXTRA
        if in_memory <= SWEEP_FACTOR * rate or in_memory < floor:
            assert plan is None
        elif plan is None:  # over the threshold, left alone only when nothing lies beyond the buffer
            assert front <= keep and (rear == 0 or (not chained and front < keep))
        else:
            assert plan.keep == keep
            assert plan.front == max(0, front - keep)  # the front's tail beyond the buffer, never the buffer
            assert plan.rear in (0, rear)  # the rear moves whole from its head, or not at all
            assert plan.rear == 0 or chained or front >= keep
            assert front - plan.front >= min(keep, front)  # the buffer stays in memory


@pytest.mark.parametrize(
    ("selected", "elapsed", "interval", "expected"),
    [(50, 5.0, 5.0, 50), (50, 4.0, 5.0, 50), (50, 10.0, 5.0, 25), (0, 30.0, 5.0, 0), (7, 7.5, 5.0, 5)],
)
def test_service_rate_is_per_interval(selected: int, elapsed: float, interval: float, expected: int) -> None:
    assert service_rate(selected, elapsed, interval) == expected
