"""Server decisions (spark_jobs/manager/servers.py): goal targets by Erlang C, allocation under limits, server homes.

Pure and table-driven; expected values are worked out by hand in the comments. The Erlang C chain used throughout is
λ = 2/s, S = 1 s, so a = 2, via the Erlang B recursion B(k) = a·B(k−1)/(k + a·B(k−1)), C = c·B/(c − a·(1 − B)):

    B(1) = 2/3, B(2) = 2/5, B(3) = 4/19, B(4) = 2/21, B(5) = 4/109, B(6) = 4/331, B(7) = 8/2325
    c = 3: P_w = 4/9 ≈ 0.444   W_q = P_w·S/(c−a) = 4/9 ≈ 0.444 s
    c = 4: P_w = 4/23 ≈ 0.174  W_q = 2/23 ≈ 0.0870 s
    c = 5: P_w = 4/67 ≈ 0.0597 W_q = 4/201 ≈ 0.0199 s
    c = 6: P_w = 2/111 ≈ 0.0180 W_q = 1/222 ≈ 0.00450 s
    c = 7: P_w = 56/11641 ≈ 0.00481 (the first below 1%: the negligible-wait cap)
"""

from __future__ import annotations

import math
import random

import pytest

from spark_jobs.manager.policy import Goal, ServerLimits
from spark_jobs.manager.servers import (
    ClassAllocation,
    ClassDemand,
    ClassFigures,
    ServerNeed,
    allocate,
    assign_servers,
    decide,
    servers_for_backlog,
    servers_for_goal,
    servers_to_start,
    within_group_caps,
)
from tests.goal_builders import DISCRETIONARY, average, percentile, velocity


def demand(name: str, importance: int | None, pi: float | None = 1.0, needed: int = 1, queued: bool = True) -> ClassDemand:
    return ClassDemand(name=name, importance=importance, pi=pi, needed_servers=needed, has_queued_work=queued)


def limits(min_: int = 0, max_: int | None = None, spread_min: bool = False) -> ServerLimits:
    return ServerLimits(min=min_, max=max_, spread_min=spread_min)


def counts(allocation: dict[str, ClassAllocation]) -> dict[str, int]:
    return {name: decision.servers for name, decision in allocation.items()}


# --------------------------------------------------------------------------------------------------------------------
# Goals → server needs (λ = 2/s, S = 1 s unless the row says otherwise)
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("goal", "arrival_rate", "expected_servers", "reachable"),
    [
        (average(1500), 2, 3, True),  # W_q ≤ 1.5 − 1 = 0.5: W_q(3) = 0.444
        (average(1100), 2, 4, True),  # W_q ≤ 0.1: W_q(4) = 0.087
        (average(1000), 2, 7, False),  # W_q ≤ 0: unreachable, the negligible-wait cap
        (average(500), 2, 7, False),  # goal below the service time: unreachable
        (percentile(90, 1000), 2, 5, True),  # P(W > 0) = P_w ≤ 0.1: P_w(5) = 0.0597
        (percentile(90, 1500), 2, 4, True),  # P_w·e^{−(c−2)·0.5} ≤ 0.1: c = 4 gives 0.064
        (percentile(50, 1000), 2, 3, True),  # P_w(3) = 0.444 ≤ 0.5
        (percentile(90, 900), 2, 7, False),  # goal below the service time
        (velocity(50), 2, 3, True),  # W_q ≤ 1·50/50 = 1: W_q(3) = 0.444
        (velocity(80), 2, 4, True),  # W_q ≤ 1·20/80 = 0.25: W_q(4) = 0.087
        (velocity(99), 2, 6, True),  # W_q ≤ 1/99 = 0.0101: W_q(5) = 0.0199, W_q(6) = 0.0045
        (DISCRETIONARY, 2, 3, True),  # floor(2) + 1: c = 2 would be 100% busy
        (DISCRETIONARY, 1.5, 2, True),  # floor(1.5) + 1
        (DISCRETIONARY, 0.1, 1, True),
        (average(1500), 0, 0, True),  # nothing arrives
        (DISCRETIONARY, 0, 0, True),  # nothing arrives (allocate still gives queued work one)
    ],
)
def test_servers_for_goal(goal: Goal, arrival_rate: float, expected_servers: int, reachable: bool) -> None:
    need = servers_for_goal(goal, arrival_rate, 1.0)
    assert (need.servers, need.goal_reachable) == (expected_servers, reachable)
    assert need.offered_load == pytest.approx(arrival_rate)


@pytest.mark.parametrize(
    ("goal", "arrival_rate", "reason"),
    [
        (average(1500), 2, "load 2.00: 3 meet mean wait <= 0.500s"),
        (percentile(90, 1500), 2, "load 2.00: 4 meet 90% wait <= 0.500s"),
        (velocity(80), 2, "load 2.00: 4 meet mean wait <= 0.250s for velocity 80"),
        (DISCRETIONARY, 2, "load 2.00: smallest stable count"),
        (average(500), 2, "load 2.00: mean wait <= -0.500s unreachable, capped where under 1% wait"),
        (average(500), 20_000, "load 20000.00: capped at the ceiling of 10000"),
        (average(500), 0, "no arrivals"),
    ],
)
def test_servers_for_goal_explains_itself(goal: Goal, arrival_rate: float, reason: str) -> None:
    assert servers_for_goal(goal, arrival_rate, 1.0).reason == reason


def test_servers_for_goal_scales_with_the_service_time() -> None:
    # λ = 20/s, S = 0.1 s: a = 2 again; goal 150 ms → W_q ≤ 0.05 s = 0.5·S; W_q(c) scales with S:
    # W_q(3) = 0.0444 ≤ 0.05 → 3 (as 0.444 ≤ 0.5 with S = 1)
    assert servers_for_goal(average(150), 20, 0.1) == ServerNeed(3, 2.0, True, "load 2.00: 3 meet mean wait <= 0.050s")


# --------------------------------------------------------------------------------------------------------------------
# allocate
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classes", "server_limits", "expected"),
    [
        pytest.param(
            [demand("A", 1, needed=3), demand("B", 3, needed=2), demand("C", 5, needed=0, queued=False)],
            limits(),
            {"A": 3, "B": 2, "C": 0},
            id="unbounded: every need met, an idle class gets none",
        ),
        pytest.param(
            [demand("A", 1, pi=2.0, needed=3), demand("B", 2, pi=1.5, needed=3), demand("C", 3, needed=2)],
            limits(max_=4),
            # first servers: A, B, C (1 left); needs in importance order: A +1 → A 2; nothing left for B, C
            {"A": 2, "B": 1, "C": 1},
            id="max short: importance order, every queued class keeps one",
        ),
        pytest.param(
            [demand("A", 2, pi=0.5, needed=3), demand("B", 2, pi=1.8, needed=3)],
            limits(max_=4),
            # first servers: B, A (2 left); B has the worse PI → B +2 = 3; A stays at 1
            {"A": 1, "B": 3},
            id="same importance: the worse PI first",
        ),
        pytest.param(
            [demand("A", 2, pi=None, needed=2), demand("B", 2, pi=1.2, needed=2), demand("C", 2, pi=0.9, needed=2)],
            limits(max_=4),
            # unknown PI ranks as 1.0: order B (1.2), A (1.0), C (0.9); first servers 3, 1 left → B
            {"A": 1, "B": 2, "C": 1},
            id="unknown PI ranks as on goal",
        ),
        pytest.param(
            [demand("X", None, pi=0.81, needed=2), demand("Y", 5, pi=0.5, needed=2)],
            limits(max_=3),
            # discretionary ranks below importance 5 whatever the PI: Y first; 1 left after first servers → Y
            {"X": 1, "Y": 2},
            id="discretionary ranks last",
        ),
        pytest.param(
            [demand("D", 1, pi=0.5), demand("E", 1, pi=3.0), demand("F", 2, pi=9.0), demand("G", None, pi=0.81)],
            limits(max_=2),
            # 4 classes with queued work, max 2: order E (1, 3.0), D (1, 0.5), F, G → E and D get the two
            {"D": 1, "E": 1, "F": 0, "G": 0},
            id="max below the classes with queued work: hard limit",
        ),
        pytest.param(
            [demand("A", 1, needed=0), demand("B", 4, needed=0)],
            limits(),
            {"A": 1, "B": 1},
            id="queued work without a computed need still gets one",
        ),
        pytest.param(
            [demand("A", 2, needed=1), demand("B", 1, needed=1)],
            limits(min_=5),
            # needs total 2; 3 more for the minimum go to the first in service order, B (importance 1)
            {"A": 1, "B": 4},
            id="min without spread: to the most important",
        ),
        pytest.param(
            [demand("A", 1, needed=3), demand("B", 2, needed=0, queued=False), demand("C", 3, needed=0, queued=False)],
            limits(min_=6, spread_min=True),
            # needs: A 3, total 3; 3 more, each to the fewest (ties in service order): B → 1, C → 1, B → 2
            {"A": 3, "B": 2, "C": 1},
            id="spread min levels up around a need",
        ),
        pytest.param(
            [demand(name, 3, needed=0, queued=False) for name in "PQR"],
            limits(min_=6, spread_min=True),
            {"P": 2, "Q": 2, "R": 2},  # 6 / 3
            id="spread min evenly",
        ),
        pytest.param(
            [
                demand("P", 3, pi=0.5, needed=0, queued=False),
                demand("Q", 3, pi=0.7, needed=0, queued=False),
                demand("R", 1, needed=0, queued=False),
            ],
            limits(min_=7, spread_min=True),
            # 7 over 3 → 2 each, the 7th to the first in service order: R (importance 1)
            {"P": 2, "Q": 2, "R": 3},
            id="spread min remainder to the first in service order",
        ),
        pytest.param(
            [demand("A", 1, needed=1), demand("B", 2, needed=1)],
            limits(min_=10, max_=4, spread_min=True),
            # min above max: max wins → 4 in all, spread: A 1 + 1, B 1 + 1
            {"A": 2, "B": 2},
            id="min above max is capped by max",
        ),
        pytest.param(
            [demand("A", 1, needed=5), demand("B", 2, needed=5)],
            limits(min_=3, max_=6),
            # needs exceed min: min adds nothing; max 6: A 1+4 = 5, B 1
            {"A": 5, "B": 1},
            id="min below the needs adds nothing",
        ),
        pytest.param(
            [demand("A", 1, needed=2, queued=False)],
            limits(max_=1),
            {"A": 1},
            id="a need without queued work, capped",
        ),
        pytest.param([], limits(min_=3), {}, id="no classes"),
    ],
)
def test_allocate(classes: list[ClassDemand], server_limits: ServerLimits, expected: dict[str, int]) -> None:
    assert counts(allocate(classes, server_limits)) == expected


def test_allocate_explains_each_class() -> None:
    classes = [demand("A", 1, needed=3), demand("B", 2, needed=2), demand("C", 3, needed=0, queued=False), demand("D", 4, needed=2)]
    # max 4: first servers A, B, D (1 left) → A 2; min 6 is capped at 4: nothing for the minimum
    assert allocate(classes, limits(min_=6, max_=4)) == {
        "A": ClassAllocation("A", 2, "needs 3, got 2: max 4 reached"),
        "B": ClassAllocation("B", 1, "needs 2, got 1: max 4 reached"),
        "C": ClassAllocation("C", 0, "needs 0, got 0"),
        "D": ClassAllocation("D", 1, "needs 2, got 1: max 4 reached"),
    }
    # unbounded, min 8 spread: needs 3 + 2 + 0 + 2 = 7, one more to the fewest: C
    assert allocate(classes, limits(min_=8, spread_min=True))["C"] == ClassAllocation("C", 1, "needs 0, got 0; +1 for min 8 (spread)")
    assert allocate(classes, limits(min_=9))["A"] == ClassAllocation("A", 5, "needs 3, got 3; +2 for min 9 (first in service order)")


@pytest.mark.parametrize("seed", range(40))
def test_allocate_invariants(seed: int) -> None:
    rng = random.Random(seed)
    classes = [
        demand(
            f"C{i}",
            rng.choice([1, 2, 3, 4, 5, None]),
            pi=rng.choice([None, 0.5, 0.81, 1.0, 1.7, 4.01]),
            needed=rng.randint(0, 6),
            queued=rng.random() < 0.7,
        )
        for i in range(rng.randint(1, 8))
    ]
    server_limits = limits(min_=rng.randint(0, 12), max_=rng.choice([None, 1, 2, 3, 5, 10, 40]), spread_min=rng.random() < 0.5)
    allocation = counts(allocate(classes, server_limits))
    total = sum(allocation.values())
    queued = [c for c in classes if c.has_queued_work]
    total_need = sum(max(c.needed_servers, int(c.has_queued_work)) for c in classes)

    if server_limits.max is not None:
        assert total <= server_limits.max  # max is hard
    cap = math.inf if server_limits.max is None else server_limits.max
    assert total == min(max(total_need, server_limits.min), cap)  # needs, raised to min, cut to max
    if len(queued) <= cap:
        assert all(allocation[c.name] >= 1 for c in queued)  # a server for every class with queued work
    if total_need >= server_limits.min:
        assert all(allocation[c.name] <= c.need for c in classes)  # no server beyond a need


# --------------------------------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("queued", "service_time", "drain", "expected"),
    [
        (0, 0.1, 2.0, 0),  # nothing waiting: nothing beyond the arrivals' need
        (1, 0.1, 2.0, 1),  # any backlog at all: a server's worth, rounded up
        (20, 0.1, 2.0, 1),  # exactly one server's work within the drain
        (21, 0.1, 2.0, 2),
        (100, 0.1, 2.0, 5),
        (100, 0.1, 10.0, 1),  # a longer drain (the default goal interval): fewer
        (10**9, 1.0, 1.0, 10_000),  # capped at the ceiling, as every count
    ],
)
def test_servers_for_backlog(queued: int, service_time: float, drain: float, expected: int) -> None:
    assert servers_for_backlog(queued, service_time, drain) == expected


@pytest.mark.parametrize(
    ("queued", "spare", "expected"),
    [
        (10, 0.5, 0),  # 1 s of work, and the spare half server serves 1 s by the next decision: none more
        (11, 0.5, 1),  # 1.1 s: 0.1 s left over, a server's worth rounded up
        (50, 0.5, 2),  # 5 s: 4 s left over, 2 servers for the 2 s drain
        (3, 1.0, 0),  # a steady state's few queued requests start no server
    ],
)
def test_servers_for_backlog_counts_what_the_spare_capacity_serves(queued: int, spare: float, expected: int) -> None:
    assert servers_for_backlog(queued, 0.1, 2.0, spare) == expected


@pytest.mark.parametrize(
    ("queued", "service_time", "drain", "spare"),
    [(-1, 0.1, 1, 0), (1, 0, 1, 0), (1, math.nan, 1, 0), (1, 0.1, 0, 0), (1, 0.1, math.inf, 0), (1, 0.1, 1, -0.5), (1, 0.1, 1, math.nan)],
)
def test_servers_for_backlog_refuses_bad_figures(queued: int, service_time: float, drain: float, spare: float) -> None:
    with pytest.raises(ValueError):
        servers_for_backlog(queued, service_time, drain, spare)


@pytest.mark.parametrize(("arrival_rate", "service_time"), [(-1, 1), (math.nan, 1), (1, 0), (1, -1), (1, math.inf)])
def test_servers_for_goal_refuses_bad_rates(arrival_rate: float, service_time: float) -> None:
    with pytest.raises(ValueError):
        servers_for_goal(average(1500), arrival_rate, service_time)


@pytest.mark.parametrize(("importance", "needed"), [(0, 1), (6, 1), (1, -1)])
def test_class_demand_refuses_out_of_range(importance: int, needed: int) -> None:
    with pytest.raises(ValueError):
        demand("A", importance, needed=needed)


def test_allocate_refuses_duplicate_names() -> None:
    with pytest.raises(ValueError):
        allocate([demand("A", 1), demand("A", 2)], limits())


# --- assign_servers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "allocation", "homes", "surplus"),
    [
        # New servers fill the classes in service order.
        ({1: None, 2: None, 3: None}, [("ONLINE", 2), ("BATCH", 1)], {1: "ONLINE", 2: "ONLINE", 3: "BATCH"}, []),
        # A server keeps its class while the class is allowed that many.
        ({1: "BATCH", 2: "ONLINE", 3: None}, [("ONLINE", 2), ("BATCH", 1)], {1: "BATCH", 2: "ONLINE", 3: "ONLINE"}, []),
        # BATCH now gets fewer: its extra server (the later one) donates to ONLINE.
        ({1: "BATCH", 2: "BATCH", 3: "ONLINE"}, [("ONLINE", 2), ("BATCH", 1)], {1: "BATCH", 2: "ONLINE", 3: "ONLINE"}, []),
        # More servers than allocated: the latest connected are surplus, the newest first.
        ({1: None, 2: None, 3: None, 4: None}, [("ONLINE", 2)], {1: "ONLINE", 2: "ONLINE"}, [4, 3]),
        # Fewer servers than allocated: the most important class is served first.
        ({5: None}, [("ONLINE", 2), ("BATCH", 1)], {5: "ONLINE"}, []),
        # A class that left the allocation frees its servers.
        ({1: "GONE", 2: "ONLINE"}, [("ONLINE", 1), ("BATCH", 1)], {2: "ONLINE", 1: "BATCH"}, []),
        ({}, [("ONLINE", 1)], {}, []),
    ],
)
def test_assign_servers(current, allocation, homes, surplus) -> None:
    assignment = assign_servers(current, allocation)
    assert assignment.homes == homes
    assert assignment.surplus == surplus


def test_a_resource_group_s_classes_together_need_no_more_servers_than_its_cap_keeps_busy() -> None:
    online = ClassDemand("ONLINE", 1, 2.0, needed_servers=4, has_queued_work=True)
    batch = ClassDemand("BATCH", 3, 1.5, needed_servers=3, has_queued_work=True)
    reports = ClassDemand("REPORTS", 4, None, needed_servers=0, has_queued_work=True)
    free = ClassDemand("FREE", 2, 1.0, needed_servers=6, has_queued_work=True)
    caps = {"ONLINE": ("G", 5), "BATCH": ("G", 5), "REPORTS": ("G", 5)}
    capped = {d.name: d for d in within_group_caps([batch, reports, online, free], caps)}
    # In service order: ONLINE's 4, then BATCH's 1 of 3; REPORTS is left none, and no first server for its queue.
    assert [capped[n].need for n in ("ONLINE", "BATCH", "REPORTS", "FREE")] == [4, 1, 0, 6]
    assert not capped["REPORTS"].has_queued_work and capped["FREE"] == free
    assert within_group_caps([online], {}) == [online]
    # Under a cap, the allocation starts no server the cap would leave idle.
    allocation = allocate(within_group_caps([online, batch], {"ONLINE": ("G", 2), "BATCH": ("G", 2)}), ServerLimits())
    assert sum(a.servers for a in allocation.values()) == 2


# --------------------------------------------------------------------------------------------------------------------
# One decision (λ = 2/s, S = 1 s, an average goal of 1500 ms: 3 worker tasks, as above)
# --------------------------------------------------------------------------------------------------------------------


def test_decide_sizes_shares_out_gives_homes_and_retires_beyond_max() -> None:
    classes = [
        ClassFigures("A", average(1500), 1, ended_per_second=2, avg_execution_ms=1000, pi=1.2),
        ClassFigures("B", average(1500), 2, ended_per_second=2, avg_execution_ms=1000, pi=0.9, queued=1),
    ]
    servers: dict[int, str | None] = {1: None, 2: "B", 3: None, 4: None, 5: "A"}
    decision = decide(classes, limits(max_=4), servers, tasks_per_server=1, drain_s=10, group_caps={}, retire_surplus=False)
    # B's first server (it has queued work), then A's 3; max 4 leaves B no more. 5 connected, 4 allowed: one retired.
    assert decision.desired == {"A": 3, "B": 1}
    assert decision.homes == {1: "A", 2: "B", 3: "A", 5: "A"}
    assert decision.retired == [4]


def test_decide_retires_every_surplus_server_only_when_it_can_start_them_again() -> None:
    classes = [ClassFigures("A", average(1500), 1, ended_per_second=2, avg_execution_ms=1000)]
    servers: dict[int, str | None] = dict.fromkeys(range(1, 6), "A")
    kept = decide(classes, limits(), servers, tasks_per_server=1, drain_s=10, group_caps={}, retire_surplus=False)
    retiring = decide(classes, limits(), servers, tasks_per_server=1, drain_s=10, group_caps={}, retire_surplus=True)
    assert kept.desired == retiring.desired == {"A": 3}
    assert kept.retired == [] and retiring.retired == [5, 4]  # the newest first


def test_decide_counts_in_servers_of_several_worker_tasks_and_within_a_group_s_cap() -> None:
    # A: 3 tasks → 2 servers of 2. B, discretionary at load 6: floor(6) + 1 = 7 tasks → 4 servers, but its group keeps
    # at most 3 in flight: ceil(3 / 2) = 2 servers.
    classes = [
        ClassFigures("A", average(1500), 1, ended_per_second=2, avg_execution_ms=1000),
        ClassFigures("B", DISCRETIONARY, None, ended_per_second=6, avg_execution_ms=1000),
    ]
    decision = decide(classes, limits(), {}, tasks_per_server=2, drain_s=10, group_caps={"B": ("G", 3)}, retire_surplus=False)
    assert decision.desired == {"A": 2, "B": 2}
    assert decision.homes == {} and decision.retired == []


@pytest.mark.parametrize(
    ("desired", "min_", "max_", "connected", "running", "expected"),
    [
        (3, 0, None, 1, 0, 2),
        (3, 0, None, 1, 2, 1),  # started but not connected yet: not started again
        (0, 2, None, 0, 0, 2),  # the minimum, before any decision
        (5, 0, 4, 0, 0, 4),  # the maximum holds
        (2, 0, None, 4, 4, 0),  # surplus: the manager retires it, the launcher stops nothing
    ],
)
def test_servers_to_start(desired: int, min_: int, max_: int | None, connected: int, running: int, expected: int) -> None:
    assert servers_to_start(desired, limits(min_, max_), connected, running) == expected
