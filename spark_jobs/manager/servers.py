"""Goal-driven server decisions for an application environment: how many servers each service class needs, how
the environment's servers are shared out under its limits, and which server serves which class.

Pure functions, no I/O: the service's manager (app/servers/service.py) and the what-if simulation decide by them.

How many servers a class needs comes from the M/M/c queue (Erlang C). With arrival rate λ and mean service time S
the offered load is a = λ·S, and with c > a servers (fewer: the queue grows without bound) a request waits with the
probability

    P_w = (a^c/c!)·(c/(c−a)) / (Σ_{k<c} a^k/k! + (a^c/c!)·(c/(c−a)))

its mean wait is W_q = P_w·S/(c−a) and its wait exceeds t with the probability P(W > t) = P_w·e^{−(c−a)·t/S}.
P_w is computed from the Erlang B recursion B(0) = 1, B(k) = a·B(k−1)/(k + a·B(k−1)) and C = c·B/(c − a·(1 − B)):
every term stays in [0, 1], so there are no factorials or powers to overflow however large c and a are.

The response time of a request is taken as S + its wait, with S the mean service time; each goal type becomes a
criterion on the wait (see `servers_for_goal`).

A goal that no number of servers can meet (the goal is shorter than the service time itself) gets the smallest
count at which fewer than NEGLIGIBLE_WAIT_PROBABILITY of the requests wait at all: beyond it more servers shorten
no wait worth having, and the miss is the service time's. The same count also caps reachable but ever stricter wait
targets, so the search always ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import assert_never

from spark_jobs.manager.policy import MAX_SERVERS, AverageGoal, DiscretionaryGoal, Goal, PercentileGoal, ServerLimits, VelocityGoal

# No application environment may have more servers (ServerLimits.max has the same bound), so no search goes higher.
SERVER_COUNT_CEILING = MAX_SERVERS
# Below this probability of waiting at all, more servers are not worth starting (see the module docstring).
NEGLIGIBLE_WAIT_PROBABILITY = 0.01
# Discretionary work (no importance) ranks below importance 5, the lowest a goal can have.
DISCRETIONARY_RANK = 6
# A class with no ended requests in the window has no PI yet; it is ranked as if exactly on its goal.
UNKNOWN_PI_RANK = 1.0


# --------------------------------------------------------------------------------------------------------------------
# Erlang C
# --------------------------------------------------------------------------------------------------------------------


def _check_rates(arrival_rate_per_s: float, service_time_s: float) -> None:
    if not math.isfinite(arrival_rate_per_s) or arrival_rate_per_s < 0:
        raise ValueError(f"arrival_rate_per_s must be finite and >= 0, got {arrival_rate_per_s!r}")
    if not math.isfinite(service_time_s) or service_time_s <= 0:
        raise ValueError(f"service_time_s must be finite and > 0, got {service_time_s!r}")


def _wait_probability(servers: int, offered_load: float, erlang_b: float) -> float:
    return servers * erlang_b / (servers - offered_load * (1 - erlang_b))


def _smallest_servers(offered_load: float, meets: Callable[[int, float], bool]) -> tuple[int, bool]:
    """The smallest stable count c for which meets(c, P_w) holds, and True; or the count at which waiting becomes
    negligible (or the ceiling), and False, when that comes first."""
    if offered_load >= SERVER_COUNT_CEILING:
        return SERVER_COUNT_CEILING, False
    erlang_b = 1.0
    for servers in range(1, SERVER_COUNT_CEILING + 1):
        # Erlang B for `servers`, built on the previous count's, so the whole search is linear in the answer.
        erlang_b = offered_load * erlang_b / (servers + offered_load * erlang_b)
        if servers <= offered_load:
            continue
        wait_probability = _wait_probability(servers, offered_load, erlang_b)
        if meets(servers, wait_probability):
            return servers, True
        if wait_probability <= NEGLIGIBLE_WAIT_PROBABILITY:
            return servers, False
    return SERVER_COUNT_CEILING, False


def _servers_for_wait(
    arrival_rate_per_s: float, service_time_s: float, target_wait_s: float, wait_percentile: float | None
) -> tuple[int, bool]:
    _check_rates(arrival_rate_per_s, service_time_s)
    if not math.isfinite(target_wait_s):
        raise ValueError(f"target_wait_s must be finite, got {target_wait_s!r}")
    if wait_percentile is not None and not 0 < wait_percentile < 100:
        raise ValueError(f"wait_percentile must be in (0, 100), got {wait_percentile!r}")
    offered_load = arrival_rate_per_s * service_time_s
    if offered_load == 0:
        return 0, True

    def meets(servers: int, wait_probability: float) -> bool:
        if target_wait_s < 0:  # a wait is never negative: no count meets this
            return False
        spare = servers - offered_load
        if wait_percentile is None:
            return wait_probability * service_time_s / spare <= target_wait_s
        exceed_share = wait_probability * math.exp(-spare * target_wait_s / service_time_s)
        return exceed_share <= 1 - wait_percentile / 100

    return _smallest_servers(offered_load, meets)


@dataclass(frozen=True, slots=True)
class ServerNeed:
    servers: int
    offered_load: float
    # False when the count is the negligible-wait cap (or the ceiling) because the goal cannot be met.
    goal_reachable: bool
    reason: str


def servers_for_goal(goal: Goal, arrival_rate_per_s: float, service_time_s: float) -> ServerNeed:
    """How many servers a service class with `goal` needs for its arrival rate and mean service time.

    - average: mean response S + W_q <= goal, so W_q <= goal − S.
    - percentile: P(response <= goal) >= percentile, so P(W > goal − S) <= 1 − percentile/100.
    - velocity: 100·S/(S + W_q) >= goal velocity v, so W_q <= S·(100 − v)/v.
    - discretionary: no goal; the smallest stable count, floor(a) + 1 (ceil(a) would leave an integral load at 100%
      utilisation, where the queue grows without bound). The one server for queued work is `allocate`'s rule.
    """
    _check_rates(arrival_rate_per_s, service_time_s)
    offered_load = float(arrival_rate_per_s * service_time_s)
    if offered_load == 0:
        return ServerNeed(0, 0.0, True, "no arrivals")
    criterion: str
    match goal:
        case AverageGoal():
            target_wait_s = goal.response_time_ms / 1000 - service_time_s
            servers, reachable = _servers_for_wait(arrival_rate_per_s, service_time_s, target_wait_s, None)
            criterion = f"mean wait <= {target_wait_s:.3f}s"
        case PercentileGoal():
            target_wait_s = goal.response_time_ms / 1000 - service_time_s
            servers, reachable = _servers_for_wait(arrival_rate_per_s, service_time_s, target_wait_s, goal.percentile)
            criterion = f"{goal.percentile}% wait <= {target_wait_s:.3f}s"
        case VelocityGoal():
            target_wait_s = service_time_s * (100 - goal.velocity) / goal.velocity
            servers, reachable = _servers_for_wait(arrival_rate_per_s, service_time_s, target_wait_s, None)
            criterion = f"mean wait <= {target_wait_s:.3f}s for velocity {goal.velocity}"
        case DiscretionaryGoal():
            servers = min(math.floor(offered_load) + 1, SERVER_COUNT_CEILING)
            return ServerNeed(servers, offered_load, True, f"load {offered_load:.2f}: smallest stable count")
        case _:
            assert_never(goal)
    if reachable:
        reason = f"load {offered_load:.2f}: {servers} meet {criterion}"
    elif servers == SERVER_COUNT_CEILING:
        reason = f"load {offered_load:.2f}: capped at the ceiling of {SERVER_COUNT_CEILING}"
    else:
        reason = f"load {offered_load:.2f}: {criterion} unreachable, capped where under {NEGLIGIBLE_WAIT_PROBABILITY:.0%} wait"
    return ServerNeed(servers, offered_load, reachable, reason)


def servers_for_backlog(queued: int, service_time_s: float, drain_s: float, spare_servers: float = 0.0) -> int:
    """Servers beyond those the arrivals need (`servers_for_goal`, a steady state) that serve the `queued` requests
    already waiting within `drain_s`, after what the arrivals' count leaves spare (`spare_servers`: that count less
    the offered load) serves of them: ceil((queued·S − spare·drain) ÷ drain), at least 0. The manager drains a backlog
    by its next decision, when it looks again; without this a class that fell behind (servers still starting, a surge)
    gets only what its arrivals need, and its backlog goes down by the little they leave spare, its goal missed all the
    while. The spare is counted so that the few requests queued at any moment in a steady state start no server."""
    if queued < 0:
        raise ValueError(f"queued must be >= 0, got {queued!r}")
    if not math.isfinite(drain_s) or drain_s <= 0:
        raise ValueError(f"drain_s must be finite and > 0, got {drain_s!r}")
    if not math.isfinite(spare_servers) or spare_servers < 0:
        raise ValueError(f"spare_servers must be finite and >= 0, got {spare_servers!r}")
    _check_rates(0.0, service_time_s)
    unserved_s = queued * service_time_s - spare_servers * drain_s
    return min(max(0, math.ceil(unserved_s / drain_s)), SERVER_COUNT_CEILING)


# --------------------------------------------------------------------------------------------------------------------
# Sharing the environment's servers out
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassDemand:
    """One service class of the application environment, as the allocation sees it."""

    name: str
    importance: int | None  # 1 (highest) .. 5; None for discretionary work, which ranks below 5
    pi: float | None  # None: no ended requests in the window yet
    needed_servers: int  # from Erlang C (`servers_for_goal`)
    has_queued_work: bool

    def __post_init__(self) -> None:
        if self.importance is not None and not 1 <= self.importance <= 5:
            raise ValueError(f"{self.name}: importance must be 1..5 or None, got {self.importance!r}")
        if self.needed_servers < 0:
            raise ValueError(f"{self.name}: needed_servers must be >= 0, got {self.needed_servers!r}")

    @property
    def rank(self) -> int:
        return DISCRETIONARY_RANK if self.importance is None else self.importance

    @property
    def pi_rank(self) -> float:
        return UNKNOWN_PI_RANK if self.pi is None else self.pi

    @property
    def floor(self) -> int:
        """What the class is owed before anything else: one server while it has queued work."""
        return 1 if self.has_queued_work else 0

    @property
    def need(self) -> int:
        return max(self.needed_servers, self.floor)


def _service_order(demand: ClassDemand) -> tuple[int, float, str]:
    # Most important first, then the worst (highest) PI; the name only makes ties deterministic.
    return demand.rank, -demand.pi_rank, demand.name


def within_group_caps(classes: Sequence[ClassDemand], caps: Mapping[str, tuple[str, int]]) -> list[ClassDemand]:
    """The demands with the classes of each resource group together needing no more servers than its cap keeps
    busy (`caps`: class -> its group and the most servers the group's max_in_flight keeps busy), shared out in
    service order: servers beyond would wait on the cap, not serve, so none are started for them. A class left
    none is owed no first server either."""
    left = {group: servers for group, servers in caps.values()}
    capped: dict[str, ClassDemand] = {}
    for demand in sorted(classes, key=_service_order):
        if demand.name in caps:
            group = caps[demand.name][0]
            servers = min(demand.need, left[group])
            left[group] -= servers
            capped[demand.name] = replace(demand, needed_servers=servers, has_queued_work=demand.has_queued_work and servers > 0)
    return [capped.get(demand.name, demand) for demand in classes]


@dataclass(frozen=True, slots=True)
class ClassAllocation:
    name: str
    servers: int
    reason: str


def allocate(classes: Sequence[ClassDemand], limits: ServerLimits) -> dict[str, ClassAllocation]:
    """Share the application environment's servers out among its service classes, in service order (importance 1
    first, then the worst PI):

    1. every class with queued work gets its first server, while `limits.max` allows;
    2. every class gets up to its need, while `limits.max` allows; the shortfall falls on the last in service order;
    3. if the total is below `limits.min` (itself capped by max), the rest go to the class with the fewest servers
       each time when `limits.spread_min` (spreading the minimum as evenly as the needs allow), else all to the
       first class in service order.

    `limits.max` is hard: goals are missed, and classes with queued work left without a server, rather than exceed it.
    """
    names = [demand.name for demand in classes]
    if len(set(names)) != len(names):
        raise ValueError(f"service class names must be unique, got {names}")
    ordered = sorted(classes, key=_service_order)
    # Unbounded, the needs are the most phases 1 and 2 ever hand out.
    remaining = sum(demand.need for demand in ordered) if limits.max is None else limits.max
    granted = {demand.name: 0 for demand in ordered}

    for demand in ordered:
        if demand.floor and remaining > 0:
            granted[demand.name] = 1
            remaining -= 1
    for demand in ordered:
        more = min(demand.need - granted[demand.name], remaining)
        if more > 0:
            granted[demand.name] += more
            remaining -= more

    minimum = limits.min if limits.max is None else min(limits.min, limits.max)
    for_minimum = {demand.name: 0 for demand in ordered}
    shortfall = minimum - sum(granted.values())
    if shortfall > 0 and ordered:
        if limits.spread_min:
            for _ in range(shortfall):
                # Fewest servers first, ties in service order: the minimum levels the classes up as evenly as it can.
                fewest = min(ordered, key=lambda d: granted[d.name] + for_minimum[d.name])
                for_minimum[fewest.name] += 1
        else:
            for_minimum[ordered[0].name] = shortfall

    allocation: dict[str, ClassAllocation] = {}
    for demand in ordered:
        servers = granted[demand.name] + for_minimum[demand.name]
        reason = f"needs {demand.need}, got {granted[demand.name]}"
        if granted[demand.name] < demand.need:
            reason += f": max {limits.max} reached"
        if for_minimum[demand.name]:
            how = "spread" if limits.spread_min else "first in service order"
            reason += f"; +{for_minimum[demand.name]} for min {limits.min} ({how})"
        allocation[demand.name] = ClassAllocation(demand.name, servers, reason)
    return allocation


# --------------------------------------------------------------------------------------------------------------------
# Which server serves which class
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Assignment:
    homes: dict[int, str]  # server id -> the service class it serves
    surplus: list[int]  # servers beyond the allocation, longest connected last (they are the first to go)


def assign_servers(current: Mapping[int, str | None], allocation: Sequence[tuple[str, int]]) -> Assignment:
    """Give each connected server a home class so that the classes get the allocated counts, moving as few servers
    as possible: a server keeps its class while the class is allowed that many; the others (new ones, and those of
    classes that now get fewer: the donors) fill the classes short of their count in `allocation` order (service
    order: the most important, worst PI first). Servers left over are surplus. `current` maps each connected
    server to its present class (None: none yet); lower ids connected earlier."""
    homes: dict[int, str] = {}
    wanted = dict(allocation)
    kept = dict.fromkeys(wanted, 0)
    free: list[int] = []
    for server in sorted(current):
        home = current[server]
        if home in wanted and kept[home] < wanted[home]:
            homes[server] = home
            kept[home] += 1
        else:
            free.append(server)
    for name, count in allocation:
        while kept[name] < count and free:
            homes[free.pop(0)] = name
            kept[name] += 1
    return Assignment(homes, sorted(free, reverse=True))


# --------------------------------------------------------------------------------------------------------------------
# One decision of the manager for an environment
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassFigures:
    """A service class of the environment at a decision: its first period's goal and importance, and what the goal
    evaluation found of it over the window (nothing ended: no rate, no service time, no PI)."""

    name: str
    goal: Goal
    importance: int | None
    ended_per_second: float = 0.0
    avg_execution_ms: float | None = None
    pi: float | None = None
    queued: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    desired: dict[str, int]  # servers per service class
    homes: dict[int, str]  # server id -> its home class
    retired: list[int]  # servers told to end (0C14)


def class_demand(figures: ClassFigures, drain_s: float, tasks_per_server: float) -> ClassDemand:
    """What a class needs, in servers of `tasks_per_server` worker tasks: Erlang C's count for its arrivals, and
    those that serve its backlog within `drain_s` (nothing ended: nothing known to size by)."""
    service_s = figures.avg_execution_ms / 1000 if figures.avg_execution_ms else None
    tasks = 0
    if service_s:
        need = servers_for_goal(figures.goal, figures.ended_per_second, service_s)
        tasks = need.servers + servers_for_backlog(figures.queued, service_s, drain_s, max(0.0, need.servers - need.offered_load))
    return ClassDemand(figures.name, figures.importance, figures.pi, math.ceil(tasks / tasks_per_server), figures.queued > 0)


def decide(
    classes: Sequence[ClassFigures],
    limits: ServerLimits,
    servers: Mapping[int, str | None],
    *,
    tasks_per_server: float,
    drain_s: float,
    group_caps: Mapping[str, tuple[str, int]],
    retire_surplus: bool,
) -> Decision:
    """The manager's decision for one environment: each class's need (`class_demand`), within its resource group's
    cap (`group_caps`: class -> its group and the group's max_in_flight, kept busy by ceil(max ÷ tasks per server)
    servers) and shared out under `limits` (`allocate`); each connected server of `servers` (id -> its home, lower
    ids connected earlier) given a home (`assign_servers`); and the surplus retired: those beyond `max` always (a
    hard limit), all of it when `retire_surplus` (the service starts the environment's servers, so it can start
    them again)."""
    demands = [class_demand(figures, drain_s, tasks_per_server) for figures in classes]
    caps = {name: (group, math.ceil(max_in_flight / tasks_per_server)) for name, (group, max_in_flight) in group_caps.items()}
    allocation = allocate(within_group_caps(demands, caps), limits)
    assignment = assign_servers(servers, [(a.name, a.servers) for a in allocation.values()])
    over_max = max(0, len(servers) - limits.max) if limits.max is not None else 0
    retired = assignment.surplus if retire_surplus else assignment.surplus[:over_max]
    return Decision({a.name: a.servers for a in allocation.values()}, assignment.homes, retired)


def servers_to_start(desired: int, limits: ServerLimits, connected: int, running: int) -> int:
    """How many servers the launcher starts now: the manager's `desired` count, at least `min` (wanted before the
    first decision too), at most `max` (a new maximum holds before the next decision), less the servers there are:
    `connected` ones (those started by hand count, and surplus ones count until they end) or, if more, those it
    `running` (started, connected or not yet)."""
    wanted = max(desired, limits.min)
    if limits.max is not None:
        wanted = min(wanted, limits.max)
    return max(0, wanted - max(connected, running))
