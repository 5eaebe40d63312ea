"""The what-if replay's engine (spark_jobs/what_if/simulation.py), pure, against cases worked out by hand: an M/M/c
queue's mean wait within its confidence interval, importance order under a shortage of servers, a resource group's
cap, promotion of blocked work, retired servers (idle, and busy: it ends what it holds first), the figures per
interval, and the same replay for the same seed. Seeded throughout; nothing is timed."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from spark_jobs.manager.policy import AverageGoal, DiscretionaryGoal, ResourceGroup, ServerLimits
from spark_jobs.what_if.model import Arrival, Environment, ManagerSettings, Period, ServiceClass
from spark_jobs.what_if.simulation import simulate


def one_class(name: str, goal_ms: int, importance: int, group: str | None = None) -> ServiceClass:
    return ServiceClass(name, (Period(AverageGoal(goal_ms), importance),), group)


def at_once(count: int, service_class: str, execution_s: float, at_s: float = 0.0) -> list[Arrival]:
    return [Arrival(at_s, service_class, execution_s) for _ in range(count)]


def test_an_m_m_c_queue_waits_as_erlang_c_says() -> None:
    """λ = 2/s, S = 1 s (exponential), c = 3 servers held by min = max = 3: Erlang C gives P_w = 4/9 and a mean wait
    W_q = P_w·S/(c − a) = 4/9 s (tests/spark_jobs/manager/test_servers.py works the chain). 20 batch means of
    ~20 000 requests: the mean wait within its 99% confidence interval (t, 19 degrees of freedom: 2.861)."""
    rng = random.Random(1)
    arrivals, t = [], 0.0
    while t < 10_000:
        t += rng.expovariate(2.0)
        arrivals.append(Arrival(t, "A", rng.expovariate(1.0)))
    environment = Environment((one_class("A", 1500, 1),), ServerLimits(min=3, max=3))
    replay = simulate(environment, arrivals, [0.0], until_s=10_100, seed=1)
    assert all(request.ended_s is not None for request in replay.served)
    waits = [request.selected_s - request.inserted_s for request in replay.served if request.selected_s is not None]
    batch = len(waits) // 20
    means = [statistics.fmean(waits[i * batch : (i + 1) * batch]) for i in range(20)]
    half_width = 2.861 * statistics.stdev(means) / math.sqrt(20)
    assert abs(statistics.fmean(means) - 4 / 9) <= half_width
    assert half_width < 0.1  # an interval narrow enough to mean something
    assert replay.servers_started == 3 and replay.servers_retired == 0


def test_under_a_shortage_the_more_important_class_is_served_first() -> None:
    """One server (min = max = 1), connecting at once at the first decision (t = 0). B's three requests come at 0,
    A's (more important) at 0.5: B's first is taken at 0, before A came; then A's three, then B's other two."""
    environment = Environment((one_class("A", 1000, 1), one_class("B", 1000, 2)), ServerLimits(min=1, max=1))
    arrivals = at_once(3, "B", 1.0) + at_once(3, "A", 1.0, at_s=0.5)
    replay = simulate(environment, arrivals, [0.0], until_s=60, seed=1)
    ends = [(request.service_class, request.ended_s) for request in replay.served]
    assert ends == [("B", 1.0), ("B", 5.0), ("B", 6.0), ("A", 2.0), ("A", 3.0), ("A", 4.0)]
    assert replay.servers_started == 1


def test_a_resource_group_s_cap_holds_and_other_work_takes_the_other_servers() -> None:
    """Five servers; A's group keeps at most 2 in flight: A's ten 1-second requests end two a second, while B's three
    run at once on three other servers."""
    environment = Environment(
        (one_class("A", 1000, 1, "CAPPED"), one_class("B", 1000, 2)),
        ServerLimits(min=5, max=5),
        resource_groups=(ResourceGroup("CAPPED", max_in_flight=2),),
    )
    replay = simulate(environment, at_once(10, "A", 1.0) + at_once(3, "B", 1.0), [0.0], until_s=60, seed=1)
    a_ends = sorted(request.ended_s for request in replay.served if request.service_class == "A")
    assert a_ends == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0]
    assert [request.ended_s for request in replay.served if request.service_class == "B"] == [1.0, 1.0, 1.0]


def test_blocked_work_is_promoted_after_the_promotion_time() -> None:
    """One server, A's work (importance 1) always queued: B's request, queued at 0, is promoted by the first select
    at or after 20 s (the first look, at 0, set the bucket due when B's head passes 20 s)."""
    environment = Environment((one_class("A", 1000, 1), one_class("B", 1000, 2)), ServerLimits(min=1, max=1))
    arrivals = [Arrival(0.0, "B", 1.0)] + [Arrival(n * 0.5, "A", 1.0) for n in range(100)]
    replay = simulate(environment, arrivals, [0.0], until_s=40, seed=1)
    b = replay.served[0]
    assert (b.selected_s, b.ended_s, b.promoted) == (20.0, 21.0, True)
    assert not any(request.promoted for request in replay.served[1:])


def test_an_idle_surplus_server_is_retired_when_the_window_no_longer_holds_its_work() -> None:
    """Four 1-second requests at 0: the first decision (0) wants one server for the queued work; it connects 2 s
    later and ends them at 3, 4, 5, 6. Decisions keep it while the 60 s window holds an end; at 70 none is left, the
    class needs nothing, and the idle server is retired at once: connected from 2 to 70."""
    environment = Environment((one_class("A", 1500, 1),))
    replay = simulate(environment, at_once(4, "A", 1.0), [2.0], until_s=100, interval_s=100, seed=1)
    assert [request.ended_s for request in replay.served] == [3.0, 4.0, 5.0, 6.0]
    assert (replay.servers_started, replay.servers_retired) == (1, 1)
    [total] = replay.environment
    assert total.server_seconds == pytest.approx(68.0)


def test_a_busy_surplus_server_ends_what_it_holds_before_it_goes() -> None:
    """A 100-second request: its server (connected at 2) is surplus from the decision at 10 (nothing queued, nothing
    ended), yet ends the request at 102 and only then goes; no other server is started before the next decision.
    (At 110 the window holds that one end, a load of 100 s per minute against a goal of 1.5 s: the manager wants the
    negligible-wait cap, 6 servers, as the service would.)"""
    environment = Environment((one_class("A", 1500, 1),))
    replay = simulate(environment, [Arrival(0.0, "A", 100.0)], [2.0], until_s=105, interval_s=105, seed=1)
    assert replay.served[0].ended_s == 102.0
    assert (replay.servers_started, replay.servers_retired) == (1, 1)
    assert replay.environment[0].server_seconds == pytest.approx(100.0)


def test_without_a_start_command_only_servers_beyond_max_are_retired() -> None:
    environment = Environment((one_class("A", 1500, 1),), starts_servers=False)
    replay = simulate(environment, at_once(4, "A", 1.0), [2.0], until_s=100, interval_s=100, seed=1)
    assert (replay.servers_started, replay.servers_retired) == (1, 0)
    assert replay.environment[0].server_seconds == pytest.approx(98.0)


def test_the_figures_per_interval() -> None:
    """Intervals of 10 s, one server from 0. A (average goal 1 s): two requests of 1 s at 0 end at 1 and 2 (responses
    1 and 2 s: PI 1.5); one of 1 s at 25 ends at 26 (PI 1.0); nothing in [10, 20). The manager wants 1 throughout
    (min = max = 1); the server, connected just after the decision at 0, has no home until the decision at 10."""
    environment = Environment((one_class("A", 1000, 1),), ServerLimits(min=1, max=1))
    replay = simulate(environment, at_once(2, "A", 1.0) + [Arrival(25.0, "A", 1.0)], [0.0], until_s=30, interval_s=10, seed=1)
    rows = [(row.start_s, row.ended, row.pi, row.had_work, row.servers_wanted, row.server_seconds) for row in replay.classes]
    assert rows == [(0.0, 2, 1.5, True, 1.0, 0.0), (10.0, 0, None, False, 1.0, 10.0), (20.0, 1, 1.0, True, 1.0, 10.0)]
    assert [(row.servers_wanted, row.servers_connected) for row in replay.environment] == [(1.0, 1.0)] * 3


def test_later_periods_and_work_left_unended() -> None:
    """A class of two periods (the first 1.5 s): a 1-second request ends in period 1, a 3-second one in period 2. A
    request still queued at the end counts as work in every interval it waited, and is left unended."""
    two_periods = ServiceClass("A", (Period(AverageGoal(1000), 1, duration_ms=1500), Period(DiscretionaryGoal(), None)))
    environment = Environment((two_periods,), ServerLimits(min=1, max=1))
    replay = simulate(
        environment, [Arrival(0.0, "A", 1.0), Arrival(0.0, "A", 3.0), Arrival(0.0, "A", 100.0)], [0.0], until_s=20, interval_s=10, seed=1
    )
    assert [(r.period, r.ended_s) for r in replay.served] == [(1, 1.0), (2, 4.0), (None, None)]
    rows = {(row.start_s, row.period): (row.ended, row.had_work) for row in replay.classes}
    assert rows == {(0.0, 1): (1, True), (0.0, 2): (1, True), (10.0, 1): (0, False), (10.0, 2): (0, True)}


def test_the_same_seed_replays_alike_and_the_latencies_are_drawn_from_it() -> None:
    rng = random.Random(5)
    arrivals = [Arrival(rng.uniform(0, 600), rng.choice("AB"), rng.expovariate(2.0)) for _ in range(2000)]
    environment = Environment((one_class("A", 800, 1), one_class("B", 2000, 3)), ServerLimits(max=6))
    latencies = [1.0, 5.0, 30.0]
    first = simulate(environment, arrivals, latencies, until_s=900, interval_s=60, seed=7)
    assert simulate(environment, arrivals, latencies, until_s=900, interval_s=60, seed=7) == first
    assert any(simulate(environment, arrivals, latencies, until_s=900, interval_s=60, seed=seed) != first for seed in (8, 9, 10))


@pytest.mark.parametrize(
    ("arrivals", "message"),
    [([Arrival(0.0, "X", 1.0)], "service class 'X'")],
)
def test_work_of_a_class_the_environment_lacks_is_refused(arrivals: list[Arrival], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate(Environment((one_class("A", 1000, 1),)), arrivals, [], until_s=10)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        ManagerSettings(interval_s=0)
    with pytest.raises(ValueError):
        simulate(Environment((one_class("A", 1000, 1),)), [], [-1.0], until_s=10)
